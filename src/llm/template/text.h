#pragma once
// Python string behaviour on UTF-8: lengths, indices and slices count code points, and strip()
// knows Unicode whitespace. Invalid bytes count as one code point each so nothing is lost.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gizml::llm::tmpl {

/// Byte offsets of each code point of s, followed by s.size().
std::vector<std::size_t> codePointOffsets(std::string_view s);
std::size_t codePointCount(std::string_view s);
/// Decodes the code point at s[pos], advancing pos (invalid bytes decode as themselves).
char32_t decodeAt(std::string_view s, std::size_t& pos);
void appendUtf8(std::string& out, char32_t c);
bool isPyWhitespace(char32_t c);

/// str.strip/lstrip/rstrip: chars == nullptr strips whitespace, else any code point of *chars.
std::string pyStrip(std::string_view s, const std::string* chars, bool left, bool right);
/// str.split(sep, maxsplit); sep == nullptr splits on runs of whitespace.
std::vector<std::string> pySplit(std::string_view s, const std::string* sep, long maxsplit);
std::string pyReplace(std::string_view s, std::string_view from, std::string_view to, long count);
std::string asciiLower(std::string_view s);
std::string asciiUpper(std::string_view s);
std::string pyTitle(std::string_view s);
std::string pyCapitalize(std::string_view s);

}  // namespace gizml::llm::tmpl
