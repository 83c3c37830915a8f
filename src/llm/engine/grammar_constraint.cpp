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

void GrammarConstraint::constrain(std::span<float> logits, GrammarTokens& tokens, bool argmaxOnly) const {
  if (!matcher_) return;
  if (argmaxOnly) {
    // The lowest id among equal maxima, as chooseToken picks.
    const auto top = static_cast<TokenId>(cpu::argmaxF32(logits.data(), static_cast<int64_t>(logits.size())));
    if (allows(top, tokens)) return;
  }
  const std::vector<bool>& allowed = tokens.mask().allowed(*matcher_);
  const bool whole = matcher_->complete();
  bool any = false;
  for (size_t id = 0; id < logits.size(); ++id) {
    const bool ok = (id < allowed.size() && allowed[id]) || (whole && tokens.endsTurn(static_cast<TokenId>(id)));
    if (!ok) logits[id] = -std::numeric_limits<float>::infinity();
    any = any || ok;
  }
  // No token can go on (the vocabulary cannot spell the next byte): end the turn.
  if (!any)
    for (size_t id = 0; id < logits.size(); ++id)
      if (tokens.endsTurn(static_cast<TokenId>(id))) logits[id] = 0.0f;
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
