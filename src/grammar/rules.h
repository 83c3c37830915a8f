#pragma once
// The inside of a Grammar: rules as runs of elements in one flat array, so that a parse
// position is an int and a parse stack a vector of them.
#include <gizml/grammar.h>

#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

namespace gizml::grammar {

struct Element {
  static constexpr int32_t kEnd = -1;    // the end of an alternative
  static constexpr int32_t kBytes = -2;  // one byte of the set `bytes`
  int32_t rule = kEnd;                   // >= 0: a reference to that rule
  int32_t bytes = -1;                    // index into Rules::byteSets
};

struct Rules {
  std::vector<Element> elements;
  std::vector<std::bitset<256>> byteSets;
  std::vector<std::vector<int32_t>> alternatives;  // each rule's alternatives: where they start
  std::vector<std::string> names;
  int32_t root = 0;
};

/// Throws when a rule can reach itself before reading a byte (src/grammar/left_recursion.cpp).
void checkNoLeftRecursion(const Rules& rules);

/// Builds Rules. A symbol is a byte set or a rule; a rule has alternatives, each a sequence of
/// symbols. Rules may refer to rules defined later (recursion), never to themselves first
/// (left recursion), which Matcher would not end on: finish() refuses that.
class Builder {
 public:
  struct Symbol {
    int32_t rule = Element::kBytes;
    int32_t bytes = -1;
  };
  using Sequence = std::vector<Symbol>;
  /// Rules one grammar may have: a bound on the memory and time a schema may take (a string of
  /// maxLength 1000 makes a thousand).
  static constexpr size_t kMaxRules = 200000;

  Symbol bytes(const std::bitset<256>& set);
  Symbol byte(unsigned char b);
  /// Bytes from..to (inclusive).
  Symbol range(unsigned char from, unsigned char to);
  /// The bytes of text in order, as a rule.
  Symbol literal(std::string_view text);
  /// A new rule with no alternatives yet (for recursion); define it with define().
  Symbol declare(const std::string& name);
  void define(Symbol rule, const std::vector<Sequence>& alternatives);
  Symbol rule(const std::string& name, const std::vector<Sequence>& alternatives);
  /// s repeated from min to max times (max < 0: without bound).
  Symbol repeat(const std::string& name, Symbol s, int min, int max);
  Symbol optional(const std::string& name, Symbol s) { return repeat(name, s, 0, 1); }

  Grammar finish(Symbol root);

 private:
  std::shared_ptr<Rules> rules_ = std::make_shared<Rules>();
  std::vector<std::vector<Sequence>> pending_;  // alternatives by rule, laid out by finish()
};

}  // namespace gizml::grammar
