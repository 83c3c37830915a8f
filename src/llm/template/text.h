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
/// Jinja's |title filter (words start after whitespace and -({[<).
std::string pyTitle(std::string_view s);
/// Python's str.title(): a letter after a non-letter is upper case, others lower.
std::string pyStrTitle(std::string_view s);
std::string pyCapitalize(std::string_view s);
std::string pySwapcase(std::string_view s);
/// str.islower()/isupper(): some cased character, none of the other case (ASCII case).
bool pyIsLower(std::string_view s);
bool pyIsUpper(std::string_view s);
/// str.splitlines(keepends) on Python's line boundaries.
std::vector<std::string> pySplitlines(std::string_view s, bool keepends);
/// str.rsplit(sep, maxsplit); sep == nullptr splits on runs of whitespace.
std::vector<std::string> pyRsplit(std::string_view s, const std::string* sep, long maxsplit);
/// str.center/ljust/rjust (align 'c', 'l', 'r') to `width` code points with `fill`.
std::string pyPad(std::string_view s, std::size_t width, std::string_view fill, char align);

}  // namespace gizml::llm::tmpl
