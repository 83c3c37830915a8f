#include "llm/tokenizer/pretokenize.h"

#include <cstdint>

#include "llm/tokenizer/unicode.h"

namespace gizml::llm {
namespace {

namespace ud = unicode_data;

// One decoded character: its byte offset, its class bits and (for ASCII) its value.
struct Char {
  uint32_t offset;
  uint16_t bits;
  char ascii;  // 0 when not ASCII
};
constexpr uint16_t kNewline = 1u << 13;  // \r or \n

constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

// Length in characters of a contraction ('s 't 're 've 'm 'll 'd, any case) at i, or 0.
size_t contraction(const std::vector<Char>& cs, size_t i) {
  if (cs[i].ascii != '\'' || i + 1 >= cs.size()) return 0;
  const char a = lower(cs[i + 1].ascii);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= cs.size()) return 0;
  const char b = lower(cs[i + 2].ascii);
  return (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') ? 3 : 0;
}

// GPT-2's contractions are lower case only.
size_t lowerContraction(const std::vector<Char>& cs, size_t i) {
  const size_t len = contraction(cs, i);
  for (size_t k = 1; k < len; ++k)
    if (cs[i + k].ascii != lower(cs[i + k].ascii)) return 0;
  return len;
}

// SmolLM's split: the digits cut the text into segments (each \p{N} one piece), and GPT-2's
// pattern splits the rest; whitespace before a digit ends a segment, so \s+(?!\S) takes it all.
void splitSmollm(const std::vector<Char>& cs, std::string_view text, std::vector<Piece>& pieces) {
  const size_t n = cs.size();
  auto run = [&](size_t j, auto&& pred) {
    while (j < n && pred(cs[j].bits)) ++j;
    return j;
  };
  auto isLetter = [](uint16_t b) { return (b & ud::kLetter) != 0; };
  auto isNumber = [](uint16_t b) { return (b & ud::kNumber) != 0; };
  auto isPunct = [](uint16_t b) { return (b & (ud::kLetter | ud::kNumber | ud::kSpace)) == 0; };
  size_t i = 0;
  while (i < n) {
    const uint16_t b = cs[i].bits;
    const bool spaceThen = cs[i].ascii == ' ' && i + 1 < n;
    size_t end;
    if (isNumber(b)) {
      end = i + 1;
    } else if (size_t len = lowerContraction(cs, i)) {
      end = i + len;
    } else if (isLetter(b) || (spaceThen && isLetter(cs[i + 1].bits))) {
      end = run(i + 1, isLetter);
    } else if (isPunct(b) || (spaceThen && isPunct(cs[i + 1].bits))) {
      end = run(i + 1, isPunct);
    } else {
      const size_t j = run(i, [](uint16_t x) { return (x & ud::kSpace) != 0; });
      end = j == n || j - i == 1 || isNumber(cs[j].bits) ? j : j - 1;
    }
    pieces.push_back({cs[i].offset, end < n ? cs[end].offset : text.size()});
    i = end;
  }
}

}  // namespace

bool splitPatternFromRegex(std::string_view regex, SplitPattern& pattern) {
  if (regex == kQwen2) return pattern = SplitPattern::qwen2, true;
  if (regex == kLlama3) return pattern = SplitPattern::llama3, true;
  if (regex == kQwen35) return pattern = SplitPattern::qwen35, true;
  return false;
}

void splitPieces(SplitPattern pattern, std::string_view text, std::vector<Piece>& pieces) {
  thread_local std::vector<Char> cs;
  cs.clear();
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      uint16_t bits = unicode::properties(byte);
      if (byte == '\r' || byte == '\n') bits |= kNewline;
      cs.push_back({static_cast<uint32_t>(i), bits, static_cast<char>(byte)});
      ++i;
      continue;
    }
    const unicode::Utf8Char c = unicode::decodeUtf8(text.data() + i, text.size() - i);
    cs.push_back({static_cast<uint32_t>(i), unicode::properties(c.cp), 0});
    i += c.length;
  }
  if (pattern == SplitPattern::smollm) return splitSmollm(cs, text, pieces);
  const uint16_t word = pattern == SplitPattern::qwen35 ? (ud::kLetter | ud::kMark) : ud::kLetter;
  const uint16_t notPunct = word | ud::kNumber | ud::kSpace;
  const size_t maxDigits = pattern == SplitPattern::llama3 ? 3 : 1;
  const size_t n = cs.size();
  auto run = [&](size_t j, auto&& pred) {
    while (j < n && pred(cs[j].bits)) ++j;
    return j;
  };
  auto isWord = [&](uint16_t b) { return (b & word) != 0; };
  auto isPunct = [&](uint16_t b) { return (b & notPunct) == 0; };
  auto isNewline = [](uint16_t b) { return (b & kNewline) != 0; };

  size_t i = 0;
  while (i < n) {
    const uint16_t b = cs[i].bits;
    size_t end;  // in characters
    if (size_t len = contraction(cs, i)) {
      end = i + len;
    } else if (isWord(b)) {
      end = run(i + 1, isWord);
    } else if (!isNewline(b) && !(b & ud::kNumber) && i + 1 < n && isWord(cs[i + 1].bits)) {
      end = run(i + 2, isWord);
    } else if (b & ud::kNumber) {
      end = i + 1;
      while (end < n && end - i < maxDigits && (cs[end].bits & ud::kNumber)) ++end;
    } else if (cs[i].ascii == ' ' && i + 1 < n && isPunct(cs[i + 1].bits)) {
      end = run(run(i + 2, isPunct), isNewline);
    } else if (isPunct(b)) {
      end = run(run(i + 1, isPunct), isNewline);
    } else {
      // A whitespace run: up to its last newline if it has one (\s*[\r\n]+); else all of it at
      // the end of the text, all but its last character before a non-space (\s+(?!\S)), or a
      // lone space (\s+).
      const size_t j = run(i, [](uint16_t x) { return (x & ud::kSpace) != 0; });
      size_t lastNewline = j;
      for (size_t k = j; k > i; --k) {
        if (isNewline(cs[k - 1].bits)) {
          lastNewline = k - 1;
          break;
        }
      }
      if (lastNewline < j) {
        end = lastNewline + 1;
      } else if (j == n || j - i == 1) {
        end = j;
      } else {
        end = j - 1;
      }
    }
    pieces.push_back({cs[i].offset, end < n ? cs[end].offset : text.size()});
    i = end;
  }
}

}  // namespace gizml::llm
