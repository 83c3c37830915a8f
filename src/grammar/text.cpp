// Grammar::text: the rules as people read them.
#include <cstdio>

#include "grammar/rules.h"

namespace gizml::grammar {
namespace {

std::string byteText(unsigned b) {
  if (b >= 0x21 && b < 0x7f && b != '\\' && b != ']' && b != '-' && b != '^') return std::string(1, static_cast<char>(b));
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02X", b);
  return buf;
}

std::string setText(const std::bitset<256>& set) {
  std::string s = "[";
  for (unsigned b = 0; b < 256;) {
    if (!set.test(b)) {
      ++b;
      continue;
    }
    unsigned e = b;
    while (e + 1 < 256 && set.test(e + 1)) ++e;
    s += byteText(b);
    if (e > b) {
      s += '-';
      s += byteText(e);
    }
    b = e + 1;
  }
  return s + "]";
}

}  // namespace

std::string Grammar::text() const {
  const Rules& r = *rules_;
  const auto name = [&](size_t i) { return r.names[i] + "#" + std::to_string(i); };
  std::string out;
  for (size_t i = 0; i < r.alternatives.size(); ++i) {
    out += name(i) + (static_cast<int32_t>(i) == r.root ? " (root)" : "") + " ::=";
    for (size_t a = 0; a < r.alternatives[i].size(); ++a) {
      out += a ? " |" : "";
      size_t at = static_cast<size_t>(r.alternatives[i][a]);
      if (r.elements[at].rule == Element::kEnd) out += " \"\"";
      for (; r.elements[at].rule != Element::kEnd; ++at) {
        const Element& e = r.elements[at];
        out += ' ';
        out += e.rule == Element::kBytes ? setText(r.byteSets[static_cast<size_t>(e.bytes)]) : name(static_cast<size_t>(e.rule));
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace gizml::grammar
