#pragma once
// GPT-2's byte-to-unicode table: byte-level BPE vocabularies spell each byte as a printable
// character (printable Latin-1 bytes as themselves, the others as U+0100 onwards).
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace gizml::llm {

/// The character (code point) that spells each byte.
std::array<uint32_t, 256> byteToUnicode();

/// The bytes a byte-level token spells; a token with a character outside the table (an added
/// token) stands for its own UTF-8 bytes, as the `tokenizers` ByteLevel decoder does.
std::string byteLevelDecode(std::string_view token);

/// The byte-level spelling of raw bytes.
std::string byteLevelEncode(std::string_view bytes);

}  // namespace gizml::llm
