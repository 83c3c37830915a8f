#pragma once
// gizml::grammar: what generated text may be. A Grammar is a context-free grammar over bytes
// (JSON values: any object, or those a JSON Schema admits); a Matcher follows a text through it
// byte by byte, so the engine can keep the tokens whose bytes the grammar allows
// (llm::Sampling::grammar). docs/grammar.md lists the schema keywords supported.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gizml::grammar {

struct Rules;  // src/grammar/rules.h

/// An immutable grammar; copies share their rules.
class Grammar {
 public:
  /// Any JSON object (OpenAI's response_format {"type": "json_object"}).
  static Grammar anyObject();
  /// The JSON values the JSON Schema (JSON text) admits, written compactly or with whitespace
  /// between tokens (at most 20 bytes of it at a place), objects' properties in the schema's
  /// order. An Error names the keyword and where in the schema it is when something is not
  /// supported, and the position when the text is not JSON.
  static Grammar fromSchema(std::string_view schemaJson);
  /// Texts of open + a JSON value the schema admits + close, once or up to `most` times in a
  /// row (whitespace before, between and after; most < 0: without bound), as a model writes
  /// tool calls (<tool_call>...</tool_call>). Errors as fromSchema's.
  static Grammar tagged(std::string_view schemaJson, std::string_view open, std::string_view close, int most);
  /// The rules, one a line, as `name ::= alternative | ...` with byte sets in brackets.
  std::string text() const;
  const Rules& rules() const { return *rules_; }

 private:
  explicit Grammar(std::shared_ptr<const Rules> rules) : rules_(std::move(rules)) {}
  std::shared_ptr<const Rules> rules_;
  friend class Builder;
  friend class Matcher;
};

/// Where a text stands in a grammar: every way its bytes so far can go on (a set of parse
/// stacks, as llama.cpp's grammars keep).
class Matcher {
 public:
  explicit Matcher(const Grammar& grammar);
  /// Whether the bytes so far followed by `bytes` still begin a sentence of the grammar.
  bool accepts(std::string_view bytes) const;
  /// Moves past `bytes`; false, and no change, when the grammar does not allow them.
  bool advance(std::string_view bytes);
  /// Whether the bytes so far are a whole sentence (the text may end here).
  bool complete() const;
  /// Whether any byte may follow.
  bool canContinue() const;

  /// The parse stacks: positions of the next byte set in the rules (an empty stack: complete).
  using Stack = std::vector<int32_t>;
  const std::vector<Stack>& stacks() const { return stacks_; }

 private:
  std::shared_ptr<const Rules> rules_;
  std::vector<Stack> stacks_;
  friend class TokenMask;
};

}  // namespace gizml::grammar
