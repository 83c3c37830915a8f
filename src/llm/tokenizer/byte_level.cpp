#include "llm/tokenizer/byte_level.h"

#include <unordered_map>

#include "llm/tokenizer/unicode.h"

namespace gizml::llm {

std::array<uint32_t, 256> byteToUnicode() {
  std::array<uint32_t, 256> table{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    table[b] = printable ? b : next++;
  }
  return table;
}

std::string byteLevelDecode(std::string_view token) {
  static const std::unordered_map<uint32_t, char> inverse = [] {
    std::unordered_map<uint32_t, char> m;
    const auto table = byteToUnicode();
    for (uint32_t b = 0; b < 256; ++b) m[table[b]] = static_cast<char>(b);
    return m;
  }();
  std::string out;
  for (size_t i = 0; i < token.size();) {
    const unicode::Utf8Char c = unicode::decodeUtf8(token.data() + i, token.size() - i);
    const auto it = inverse.find(c.cp);
    if (it == inverse.end()) return std::string(token);
    out.push_back(it->second);
    i += c.length;
  }
  return out;
}

std::string byteLevelEncode(std::string_view bytes) {
  static const std::array<uint32_t, 256> table = byteToUnicode();
  std::string out;
  for (unsigned char b : bytes) unicode::appendUtf8(out, table[b]);
  return out;
}

}  // namespace gizml::llm
