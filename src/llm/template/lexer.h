#pragma once
// Splits template source into text and tag tokens, applying Jinja's whitespace rules the way
// transformers configures them: trim_blocks (drop the newline after a block or comment tag),
// lstrip_blocks (drop indentation before one), '-' and '+' modifiers, raw blocks, and
// keep_trailing_newline=False.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gizml::llm::tmpl {

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };

struct Token {
  Tok type;
  std::string text;  // text, name, operator, or the unescaped string literal
  int64_t intValue = 0;
  double floatValue = 0;
  int line = 1, column = 1;
};

std::vector<Token> tokenize(const std::string& source);

/// Throws gizml::Error("chat template line L, column C: message").
[[noreturn]] void syntaxError(int line, int column, const std::string& message);

}  // namespace gizml::llm::tmpl
