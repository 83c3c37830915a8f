// RFC 4648 base64 both ways (base64.h).
#include "ai/base64.h"

#include <array>

namespace gizml::ai {
namespace {

constexpr std::string_view kDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Each character's 6 bits, or -1 for a character outside the alphabet.
constexpr std::array<int8_t, 256> kValues = [] {
  std::array<int8_t, 256> values{};
  values.fill(-1);
  for (size_t i = 0; i < kDigits.size(); ++i) values[static_cast<unsigned char>(kDigits[i])] = static_cast<int8_t>(i);
  return values;
}();

}  // namespace

std::string base64(std::span<const uint8_t> bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t left = bytes.size() - i;
    const uint32_t v = uint32_t{bytes[i]} << 16 | (left > 1 ? uint32_t{bytes[i + 1]} << 8 : 0) | (left > 2 ? bytes[i + 2] : 0);
    out += kDigits[v >> 18 & 63];
    out += kDigits[v >> 12 & 63];
    out += left > 1 ? kDigits[v >> 6 & 63] : '=';
    out += left > 2 ? kDigits[v & 63] : '=';
  }
  return out;
}

std::optional<std::vector<uint8_t>> fromBase64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  size_t padding = 0;
  while (padding < 2 && padding < text.size() && text[text.size() - 1 - padding] == '=') ++padding;
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  uint32_t bits = 0;
  for (size_t i = 0; i < text.size() - padding; ++i) {
    const int8_t v = kValues[static_cast<unsigned char>(text[i])];
    if (v < 0) return std::nullopt;  // a stray '=' too
    bits = bits << 6 | static_cast<uint32_t>(v);
    if (i % 4 != 0) out.push_back(static_cast<uint8_t>(bits >> (6 - 2 * (i % 4)) & 0xff));
  }
  return out;
}

}  // namespace gizml::ai
