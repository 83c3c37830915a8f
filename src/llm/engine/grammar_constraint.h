#pragma once
// Sampling::grammar in the engine: each step, the logits of the tokens the grammar does not
// allow next become -inf (before the penalties' effect is sampled); the end of the turn stays
// allowed only once the text is a whole sentence.
#include <gizml/grammar.h>
#include <gizml/llm.h>

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

/// One request's place in its grammar.
class GrammarConstraint {
 public:
  /// Inactive until the token `after` when s.after >= 0.
  explicit GrammarConstraint(const Sampling& s);
  /// Sets the logits of the tokens not allowed next to -inf. With `argmaxOnly` (greedy, no
  /// log probabilities) an allowed argmax leaves the row as it is: the pick is the same.
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
