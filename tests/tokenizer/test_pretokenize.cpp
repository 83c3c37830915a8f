// The split matchers against Python's `regex` module on combining marks, digit runs and
// contractions (expected pieces generated with regex.findall; Qwen 3.5's pattern has no
// tokenizer.json among the fixtures).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "llm/tokenizer/pretokenize.h"

namespace {

using gizml::llm::SplitPattern;

std::vector<std::string> split(SplitPattern pattern, const std::string& text) {
  std::vector<gizml::llm::Piece> pieces;
  gizml::llm::splitPieces(pattern, text, pieces);
  std::vector<std::string> out;
  for (const auto& p : pieces) out.push_back(text.substr(p.begin, p.end - p.begin));
  return out;
}

struct Case {
  std::string text;
  std::vector<std::string> qwen35, llama3;
};

const Case kCases[] = {
    {"\xE0\xA4\xB9" "\xE0\xA4\xBF" "\xE0\xA4\xA8" "\xE0\xA5\x8D" "\xE0\xA4\xA6" "\xE0\xA5\x80" " \xE0\xA4\xAD" "\xE0\xA4\xBE" "\xE0\xA4\xB7" "\xE0\xA4\xBE" "\xCC\x81" " e\xCC\x81" "te\xCC\x81" " \xCC\x81" "x",
     {"\xE0\xA4\xB9" "\xE0\xA4\xBF" "\xE0\xA4\xA8" "\xE0\xA5\x8D" "\xE0\xA4\xA6" "\xE0\xA5\x80", " \xE0\xA4\xAD" "\xE0\xA4\xBE" "\xE0\xA4\xB7" "\xE0\xA4\xBE" "\xCC\x81", " e\xCC\x81" "te\xCC\x81", " \xCC\x81" "x"},
     {"\xE0\xA4\xB9", "\xE0\xA4\xBF" "\xE0\xA4\xA8", "\xE0\xA5\x8D" "\xE0\xA4\xA6", "\xE0\xA5\x80", " \xE0\xA4\xAD", "\xE0\xA4\xBE" "\xE0\xA4\xB7", "\xE0\xA4\xBE" "\xCC\x81", " e", "\xCC\x81" "te", "\xCC\x81", " \xCC\x81", "x"}},
    {"a\xCC\x80" "\xCC\x81" "b .\xCC\x81" "c 12345 \xCC\x81" "\xCC\x82" "!!\x0A" "\x0A" "  x",
     {"a\xCC\x80" "\xCC\x81" "b", " .", "\xCC\x81" "c", " ", "1", "2", "3", "4", "5", " \xCC\x81" "\xCC\x82", "!!\x0A" "\x0A", " ", " x"},
     {"a", "\xCC\x80" "\xCC\x81", "b", " .\xCC\x81", "c", " ", "123", "45", " \xCC\x81" "\xCC\x82" "!!\x0A" "\x0A", " ", " x"}},
    {"x  \x09" "\x0A" " y'S 'LL\xCC\x88" " \xE0\xB8\xB1" "\xE0\xB8\xB2",
     {"x", "  \x09" "\x0A", " y", "'S", " '", "LL\xCC\x88", " \xE0\xB8\xB1" "\xE0\xB8\xB2"},
     {"x", "  \x09" "\x0A", " y", "'S", " '", "LL", "\xCC\x88", " \xE0\xB8\xB1", "\xE0\xB8\xB2"}},
};

TEST(TokenizerPretokenize, MatchesTheRegexModule) {
  for (const Case& c : kCases) {
    EXPECT_EQ(split(SplitPattern::qwen35, c.text), c.qwen35) << c.text;
    EXPECT_EQ(split(SplitPattern::llama3, c.text), c.llama3) << c.text;
  }
}

}  // namespace

// SmolLM's split, against Hugging Face tokenizers' Sequence([Digits(individual_digits=True),
// ByteLevel(add_prefix_space=False)]).pre_tokenize_str, its pieces decoded from byte-level.
TEST(TokenizerPretokenize, SmollmMatchesHuggingFace) {
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {"It's 2024, isn't it?", {"It", "'s", " ", "2", "0", "2", "4", ",", " isn", "'t", " it", "?"}},
      {"  two  spaces 12 34", {" ", " two", " ", " spaces", " ", "1", "2", " ", "3", "4"}},
      {"x\n\n  y\tz ", {"x", "\n\n ", " y", "\t", "z", " "}},
      {"Don'T 'll", {"Don", "'", "T", " '", "ll"}},
      {"!!! ... wow\u00b9\u00b2", {"!!!", " ...", " wow", "\u00b9", "\u00b2"}},
      {"\u00fcn\u00efc\u00f6d\u00e9 \U0001F642 text", {"\u00fcn\u00efc\u00f6d\u00e9", " \U0001F642", " text"}},
      {"a  1", {"a", "  ", "1"}},
  };
  for (const auto& [text, want] : cases) EXPECT_EQ(split(SplitPattern::smollm, text), want) << text;
}
