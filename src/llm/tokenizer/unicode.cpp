#include "llm/tokenizer/unicode.h"

#include <algorithm>
#include <vector>

namespace gizml::llm::unicode {
namespace {

// Hangul syllables compose and decompose by arithmetic (Unicode section 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount;
constexpr uint32_t kSCount = kLCount * kNCount;

uint8_t combiningClass(uint32_t cp) { return static_cast<uint8_t>(properties(cp) & 0xFF); }

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto* begin = unicode_data::kDecompositions;
  const auto* end = begin + unicode_data::kDecompositionCount;
  const auto* it = std::lower_bound(begin, end, cp, [](const auto& d, uint32_t c) { return d.cp < c; });
  if (it != end && it->cp == cp) {
    out.insert(out.end(), unicode_data::kDecompositionPool + it->offset,
               unicode_data::kDecompositionPool + it->offset + it->length);
  } else {
    out.push_back(cp);
  }
}

// The primary composite of (a, b), or 0.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto* begin = unicode_data::kCompositions;
  const auto* end = begin + unicode_data::kCompositionCount;
  const auto* it = std::lower_bound(begin, end, std::pair{a, b}, [](const auto& c, const auto& key) {
    return c.first != key.first ? c.first < key.first : c.second < key.second;
  });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

}  // namespace

Utf8Char decodeUtf8(const char* s, size_t n) {
  const auto* u = reinterpret_cast<const unsigned char*>(s);
  const uint32_t b0 = u[0];
  if (b0 < 0x80) return {b0, 1};
  const Utf8Char invalid{kInvalidBase + b0, 1};
  uint32_t length, cp, min;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2, cp = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3, cp = b0 & 0x0F, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return invalid;
  }
  if (n < length) return invalid;
  for (uint32_t i = 1; i < length; ++i) {
    if ((u[i] & 0xC0) != 0x80) return invalid;
    cp = (cp << 6) | (u[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return invalid;
  return {cp, length};
}

// The number of leading bytes of s that begin a valid sequence (its "maximal subpart"), and the
// length the sequence needs.
static void validPrefix(const unsigned char* u, size_t n, size_t& prefix, size_t& needed) {
  const unsigned b0 = u[0];
  needed = b0 < 0x80 ? 1 : b0 >= 0xC2 && b0 <= 0xDF ? 2 : b0 >= 0xE0 && b0 <= 0xEF ? 3
         : b0 >= 0xF0 && b0 <= 0xF4 ? 4 : 0;
  prefix = needed ? 1 : 0;
  for (size_t i = 1; i < needed && i < n; ++i) {
    unsigned lo = 0x80, hi = 0xBF;  // the second byte's range depends on the first (Table 3-7)
    if (i == 1 && b0 == 0xE0) lo = 0xA0;
    if (i == 1 && b0 == 0xED) hi = 0x9F;
    if (i == 1 && b0 == 0xF0) lo = 0x90;
    if (i == 1 && b0 == 0xF4) hi = 0x8F;
    if (u[i] < lo || u[i] > hi) break;
    prefix = i + 1;
  }
}

size_t incompleteUtf8Length(const char* s, size_t n) {
  size_t prefix, needed;
  validPrefix(reinterpret_cast<const unsigned char*>(s), n, prefix, needed);
  return prefix == n && prefix < needed ? prefix : 0;
}

void appendUtf8(std::string& out, uint32_t cp) {
  if (cp >= kInvalidBase) {
    out.push_back(static_cast<char>(cp - kInvalidBase));
  } else if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string toValidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    size_t prefix, needed;
    validPrefix(reinterpret_cast<const unsigned char*>(bytes.data() + i), bytes.size() - i, prefix,
                needed);
    if (needed > 0 && prefix == needed) {
      out.append(bytes.data() + i, prefix);
      i += prefix;
    } else {
      out.append("\xEF\xBF\xBD");
      i += std::max<size_t>(prefix, 1);
    }
  }
  return out;
}

bool isNfcQuick(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const Utf8Char c = decodeUtf8(text.data() + i, text.size() - i);
    if (properties(c.cp) & unicode_data::kNfcUnstable) return false;
    i += c.length;
  }
  return true;
}

std::string nfc(std::string_view text) {
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const Utf8Char c = decodeUtf8(text.data() + i, text.size() - i);
    decompose(c.cp, cps);
    i += c.length;
  }
  // Canonical order: stable-sort each run of non-starters by combining class.
  for (size_t i = 1; i < cps.size(); ++i) {
    const uint8_t cc = combiningClass(cps[i]);
    if (cc == 0) continue;
    for (size_t j = i; j > 0 && combiningClass(cps[j - 1]) > cc; --j) std::swap(cps[j], cps[j - 1]);
  }
  // Canonical composition: join each character to the last starter unless blocked.
  std::vector<uint32_t> out;
  out.reserve(cps.size());
  size_t starter = SIZE_MAX;
  int lastClass = -1;
  for (uint32_t cp : cps) {
    const int cc = combiningClass(cp);
    if (starter != SIZE_MAX && (lastClass < cc || lastClass == 0)) {
      if (const uint32_t composite = compose(out[starter], cp)) {
        out[starter] = composite;
        continue;
      }
    }
    if (cc == 0) starter = out.size();
    lastClass = cc;
    out.push_back(cp);
  }
  std::string result;
  result.reserve(text.size());
  for (uint32_t cp : out) appendUtf8(result, cp);
  return result;
}

}  // namespace gizml::llm::unicode
