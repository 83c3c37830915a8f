#pragma once
// Sampling::grammar in the engine: each step, the logits of the tokens the grammar does not
// allow next become -inf (before the penalties' effect is sampled); the end of the turn stays
// allowed only once the text is a whole sentence.
#include <gizml/grammar.h>
#include <gizml/llm.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "grammar/token_mask.h"

namespace gizml::llm {

/// The bytes of a tokenizer's tokens and their trie, made once per engine.
class GrammarTokens {
 public:
  GrammarTokens(const Tokenizer& tokenizer, std::vector<TokenId> endOfTurn);
  /// The token's bytes; empty for special tokens and ids outside the tokenizer.
  const std::string& piece(TokenId id) const;
  bool endsTurn(TokenId id) const;
  grammar::TokenMask& mask() { return mask_; }

 private:
  std::vector<std::string> pieces_;
  std::vector<TokenId> endOfTurn_;
  grammar::TokenMask mask_;
};

/// The tokens of a row that a grammar lets through next, as bits (token i: bit i % 32 of word
/// i / 32). Where it allows none (the vocabulary cannot spell the next byte) the bits are the
/// end of the turn's tokens and `endOnly` is set: their logits become 0, the turn ends.
struct AllowedTokens {
  std::vector<uint32_t> words;
  bool endOnly = false;
  bool has(size_t id) const { return id / 32 < words.size() && (words[id / 32] >> (id % 32) & 1u) != 0; }
};

/// One request's place in its grammar.
class GrammarConstraint {
 public:
  /// Inactive until the token `after` when s.after >= 0.
  explicit GrammarConstraint(const Sampling& s);
  /// Whether it constrains the next token (it is inactive until its `after` token).
  bool active() const { return matcher_.has_value(); }
  /// The tokens among `vocab` that it allows next (active() only).
  AllowedTokens allowed(GrammarTokens& tokens, size_t vocab) const;
  /// Sets the logits of the tokens not allowed next to -inf (as `allowed` says). With
  /// `argmaxOnly` (greedy, no log probabilities) an allowed argmax leaves the row as it is: the
  /// pick is the same.
  void constrain(std::span<float> logits, GrammarTokens& tokens, bool argmaxOnly) const;
  /// Moves past the chosen token.
  void accept(TokenId token, const GrammarTokens& tokens);

 private:
  bool allows(TokenId token, const GrammarTokens& tokens) const;
  std::shared_ptr<const grammar::Grammar> grammar_;
  TokenId after_ = -1;
  std::optional<grammar::Matcher> matcher_;
};

}  // namespace gizml::llm
