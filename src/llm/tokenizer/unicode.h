#pragma once
// UTF-8 decoding, the Unicode classes the pre-tokenizers test, and NFC normalization.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "llm/tokenizer/unicode_data.h"

namespace gizml::llm::unicode {

/// A decoded UTF-8 sequence. Invalid input decodes as one byte b with cp = kInvalidBase + b, so
/// that arbitrary bytes tokenize (as punctuation) and survive normalization unchanged.
struct Utf8Char {
  uint32_t cp;
  uint32_t length;  // bytes consumed (>= 1)
};
inline constexpr uint32_t kInvalidBase = 0x110000;

/// Decodes the sequence at s[0..n), n >= 1.
Utf8Char decodeUtf8(const char* s, size_t n);

/// Length of the longest prefix of s that is a truncated but otherwise valid sequence that more
/// bytes could complete (0 if s starts a complete or an invalid sequence).
size_t incompleteUtf8Length(const char* s, size_t n);

void appendUtf8(std::string& out, uint32_t cp);

/// Replaces invalid UTF-8 by U+FFFD, one per maximal invalid subpart, as Rust's from_utf8_lossy.
std::string toValidUtf8(std::string_view bytes);

inline uint16_t properties(uint32_t cp) {
  if (cp >= 0x110000) return 0;
  return unicode_data::kStage2[unicode_data::kStage1[cp >> 7] * 128u + (cp & 127u)];
}
inline bool isSpace(uint32_t cp) { return properties(cp) & unicode_data::kSpace; }

/// True when NFC leaves text unchanged for certain (no character NFC could touch).
bool isNfcQuick(std::string_view text);

/// The NFC form of text; invalid bytes pass through unchanged.
std::string nfc(std::string_view text);

}  // namespace gizml::llm::unicode
