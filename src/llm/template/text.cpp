#include "llm/template/text.h"

#include <algorithm>

namespace gizml::llm::tmpl {

char32_t decodeAt(std::string_view s, std::size_t& pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(pos);
  const int extra = b0 >= 0xF0 && b0 < 0xF5 ? 3 : b0 >= 0xE0 && b0 < 0xF0 ? 2 : b0 >= 0xC2 && b0 < 0xE0 ? 1 : 0;
  if (extra == 0) {  // ASCII, or an invalid byte standing for itself
    ++pos;
    return b0;
  }
  char32_t c = b0 & (0x3F >> extra);
  for (int i = 1; i <= extra; ++i) {
    if (pos + i >= s.size() || (byte(pos + i) & 0xC0) != 0x80) {
      ++pos;
      return b0;
    }
    c = (c << 6) | (byte(pos + i) & 0x3F);
  }
  pos += extra + 1;
  return c;
}

std::vector<std::size_t> codePointOffsets(std::string_view s) {
  std::vector<std::size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (std::size_t pos = 0; pos < s.size();) {
    offsets.push_back(pos);
    decodeAt(s, pos);
  }
  offsets.push_back(s.size());
  return offsets;
}

std::size_t codePointCount(std::string_view s) {
  std::size_t n = 0;
  for (std::size_t pos = 0; pos < s.size(); ++n) decodeAt(s, pos);
  return n;
}

void appendUtf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool isPyWhitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string pyStrip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<char32_t> set;
  if (chars)
    for (std::size_t pos = 0; pos < chars->size();) set.push_back(decodeAt(*chars, pos));
  const auto strips = [&](char32_t c) {
    if (!chars) return isPyWhitespace(c);
    for (char32_t x : set)
      if (x == c) return true;
    return false;
  };
  const std::vector<std::size_t> offsets = codePointOffsets(s);
  std::size_t first = 0, last = offsets.size() - 1;  // code point indices [first, last)
  const auto at = [&](std::size_t i) {
    std::size_t pos = offsets[i];
    return decodeAt(s, pos);
  };
  if (left)
    while (first < last && strips(at(first))) ++first;
  if (right)
    while (last > first && strips(at(last - 1))) --last;
  return std::string(s.substr(offsets[first], offsets[last] - offsets[first]));
}

std::vector<std::string> pySplit(std::string_view s, const std::string* sep, long maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    std::size_t start = 0;
    while (maxsplit < 0 || static_cast<long>(parts.size()) < maxsplit) {
      const std::size_t hit = s.find(*sep, start);
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, hit - start));
      start = hit + sep->size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  std::size_t pos = 0;
  while (pos < s.size()) {
    std::size_t next = pos;
    if (isPyWhitespace(decodeAt(s, next))) {
      pos = next;
      continue;
    }
    if (maxsplit >= 0 && static_cast<long>(parts.size()) == maxsplit) {
      parts.emplace_back(s.substr(pos));  // the rest, trailing whitespace and all
      return parts;
    }
    std::size_t end = pos;
    while (end < s.size()) {
      std::size_t after = end;
      if (isPyWhitespace(decodeAt(s, after))) break;
      end = after;
    }
    parts.emplace_back(s.substr(pos, end - pos));
    pos = end;
  }
  return parts;
}

std::string pyReplace(std::string_view s, std::string_view from, std::string_view to, long count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` before every code point and at the end.
    const std::vector<std::size_t> offsets = codePointOffsets(s);
    long done = 0;
    for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
      if (count < 0 || done < count) out += to, ++done;
      out += s.substr(offsets[i], offsets[i + 1] - offsets[i]);
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  std::size_t start = 0;
  for (long done = 0; count < 0 || done < count; ++done) {
    const std::size_t hit = s.find(from, start);
    if (hit == std::string_view::npos) break;
    out += s.substr(start, hit - start);
    out += to;
    start = hit + from.size();
  }
  out += s.substr(start);
  return out;
}

std::string asciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string asciiUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

static bool isAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string pyTitle(std::string_view s) {
  // Jinja's title(): a word starts after whitespace, '-', '(', '{', '[' or '<'; ASCII case only.
  std::string out(s);
  bool start = true;
  for (char& c : out) {
    if (isAsciiAlpha(c) || (c >= '0' && c <= '9') || static_cast<unsigned char>(c) >= 0x80) {
      if (start) c = asciiUpper(std::string_view(&c, 1))[0];
      else c = asciiLower(std::string_view(&c, 1))[0];
      start = false;
    } else {
      start = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '-' || c == '(' || c == '{' || c == '[' ||
              c == '<';
    }
  }
  return out;
}

std::string pyStrTitle(std::string_view s) {
  std::string out(s);
  bool afterLetter = false;
  for (char& c : out) {
    if (isAsciiAlpha(c)) {
      c = afterLetter ? asciiLower(std::string_view(&c, 1))[0] : asciiUpper(std::string_view(&c, 1))[0];
      afterLetter = true;
    } else {
      afterLetter = false;
    }
  }
  return out;
}

std::string pySwapcase(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  return out;
}

static bool casedAs(std::string_view s, bool lower) {
  bool cased = false;
  for (const char c : s) {
    const bool isLower = c >= 'a' && c <= 'z', isUpper = c >= 'A' && c <= 'Z';
    if (lower ? isUpper : isLower) return false;
    cased = cased || isLower || isUpper;
  }
  return cased;
}

bool pyIsLower(std::string_view s) { return casedAs(s, true); }
bool pyIsUpper(std::string_view s) { return casedAs(s, false); }

static bool isLineBreak(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

std::vector<std::string> pySplitlines(std::string_view s, bool keepends) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t pos = 0; pos < s.size();) {
    const std::size_t at = pos;
    const char32_t c = decodeAt(s, pos);
    if (!isLineBreak(c)) continue;
    if (c == '\r' && pos < s.size() && s[pos] == '\n') ++pos;
    lines.emplace_back(s.substr(start, (keepends ? pos : at) - start));
    start = pos;
  }
  if (start < s.size()) lines.emplace_back(s.substr(start));
  return lines;
}

std::vector<std::string> pyRsplit(std::string_view s, const std::string* sep, long maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    std::size_t end = s.size();
    while (maxsplit < 0 || static_cast<long>(parts.size()) < maxsplit) {
      if (end < sep->size()) break;
      const std::size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    parts.emplace_back(s.substr(0, end));
  } else {
    const std::vector<std::size_t> offsets = codePointOffsets(s);
    const auto spaceAt = [&](std::size_t i) {
      std::size_t pos = offsets[i];
      return isPyWhitespace(decodeAt(s, pos));
    };
    std::size_t end = offsets.size() - 1;  // code point index
    while (true) {
      while (end > 0 && spaceAt(end - 1)) --end;
      if (end == 0) break;
      if (maxsplit >= 0 && static_cast<long>(parts.size()) == maxsplit) {
        parts.emplace_back(s.substr(0, offsets[end]));  // the rest, leading whitespace kept
        break;
      }
      std::size_t begin = end;
      while (begin > 0 && !spaceAt(begin - 1)) --begin;
      parts.emplace_back(s.substr(offsets[begin], offsets[end] - offsets[begin]));
      end = begin;
    }
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::string pyPad(std::string_view s, std::size_t width, std::string_view fill, char align) {
  const std::size_t n = codePointCount(s);
  if (width <= n) return std::string(s);
  const std::size_t margin = width - n;
  // CPython's centring puts the odd space on the left when width is odd.
  const std::size_t left = align == 'r' ? margin : align == 'l' ? 0 : margin / 2 + (margin & width & 1);
  std::string out;
  for (std::size_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (std::size_t i = left; i < margin; ++i) out += fill;
  return out;
}

std::string pyCapitalize(std::string_view s) {
  std::string out = asciiLower(s);
  if (!out.empty()) out[0] = asciiUpper(out.substr(0, 1))[0];
  return out;
}

}  // namespace gizml::llm::tmpl
