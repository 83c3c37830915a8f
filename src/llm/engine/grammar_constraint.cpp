#include "llm/engine/grammar_constraint.h"

#include <algorithm>
#include <limits>

#include "cpu/reduce.h"

namespace gizml::llm {

GrammarTokens::GrammarTokens(const Tokenizer& tokenizer, std::vector<TokenId> endOfTurn)
    : pieces_([&] {
        std::vector<std::string> p(tokenizer.vocabSize());
        for (size_t id = 0; id < p.size(); ++id)
          if (!tokenizer.isSpecial(static_cast<TokenId>(id))) p[id] = tokenizer.pieceBytes(static_cast<TokenId>(id));
        return p;
      }()),
      endOfTurn_(std::move(endOfTurn)),
      mask_(pieces_) {}

const std::string& GrammarTokens::piece(TokenId id) const {
  static const std::string none;
  return id >= 0 && static_cast<size_t>(id) < pieces_.size() ? pieces_[static_cast<size_t>(id)] : none;
}

bool GrammarTokens::endsTurn(TokenId id) const {
  return std::find(endOfTurn_.begin(), endOfTurn_.end(), id) != endOfTurn_.end();
}

GrammarConstraint::GrammarConstraint(const Sampling& s) : grammar_(s.grammar), after_(s.after) {
  if (grammar_ && after_ < 0) matcher_.emplace(*grammar_);
}

bool GrammarConstraint::allows(TokenId token, const GrammarTokens& tokens) const {
  if (tokens.endsTurn(token)) return matcher_->complete();
  const std::string& piece = tokens.piece(token);
  return !piece.empty() && matcher_->accepts(piece);
}

AllowedTokens GrammarConstraint::allowed(GrammarTokens& tokens, size_t vocab) const {
  const std::vector<bool>& grammar = tokens.mask().allowed(*matcher_);
  const bool whole = matcher_->complete();
  AllowedTokens out;
  out.words.assign((vocab + 31) / 32, 0u);
  bool any = false;
  for (size_t id = 0; id < vocab; ++id)
    if ((id < grammar.size() && grammar[id]) || (whole && tokens.endsTurn(static_cast<TokenId>(id)))) {
      out.words[id / 32] |= 1u << (id % 32);
      any = true;
    }
  if (any) return out;
  // No token can go on: the end of the turn, at logit 0.
  out.endOnly = true;
  for (size_t id = 0; id < vocab; ++id)
    if (tokens.endsTurn(static_cast<TokenId>(id))) out.words[id / 32] |= 1u << (id % 32);
  return out;
}

void GrammarConstraint::constrain(std::span<float> logits, GrammarTokens& tokens, bool argmaxOnly) const {
  if (!matcher_) return;
  if (argmaxOnly) {
    // The lowest id among equal maxima, as chooseToken picks.
    const auto top = static_cast<TokenId>(cpu::argmaxF32(logits.data(), static_cast<int64_t>(logits.size())));
    if (allows(top, tokens)) return;
  }
  const AllowedTokens ok = allowed(tokens, logits.size());
  for (size_t id = 0; id < logits.size(); ++id)
    logits[id] = !ok.has(id) ? -std::numeric_limits<float>::infinity() : ok.endOnly ? 0.0f : logits[id];
}

void GrammarConstraint::accept(TokenId token, const GrammarTokens& tokens) {
  if (!grammar_) return;
  if (!matcher_) {
    if (token == after_) matcher_.emplace(*grammar_);
    return;
  }
  if (!tokens.endsTurn(token)) matcher_->advance(tokens.piece(token));
}

}  // namespace gizml::llm
