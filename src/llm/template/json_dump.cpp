#include "llm/template/json_dump.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gizml/error.h"
#include "llm/template/text.h"

namespace gizml::llm::tmpl {
namespace {

void appendEscape(std::string& out, char32_t c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
  out += buf;
}

void dumpString(std::string& out, const std::string& s, bool ensureAscii) {
  out += '"';
  for (std::size_t pos = 0; pos < s.size();) {
    const std::size_t start = pos;
    const char32_t c = decodeAt(s, pos);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          appendEscape(out, c);
        } else if (ensureAscii && c >= 0x80) {
          if (c >= 0x10000) {  // a surrogate pair, as Python writes it
            appendEscape(out, 0xD800 + ((c - 0x10000) >> 10));
            appendEscape(out, 0xDC00 + ((c - 0x10000) & 0x3FF));
          } else {
            appendEscape(out, c);
          }
        } else {
          out.append(s, start, pos - start);
        }
    }
  }
  out += '"';
}

// json.dumps turns int, float, bool and None keys into strings.
std::string jsonKey(const Value& key) {
  if (key.isString()) return key.str();
  if (key.isBool()) return key.asBool() ? "true" : "false";
  if (key.isNone()) return "null";
  if (key.isInt()) return key.toString();
  if (key.isFloat()) {
    const double d = key.asDouble();
    return std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : formatFloat(d);
  }
  throw Error("keys must be str, int, float, bool or None, not " + key.typeName());
}

void dump(std::string& out, const Value& v, const JsonOptions& o, int level) {
  if (out.size() > o.maxBytes) throw Error("tojson: output too large");
  const auto newline = [&](int lvl) {
    if (!o.indent) return;
    if (out.size() > o.maxBytes) throw Error("tojson: output too large");
    out += '\n';
    for (int i = 0; i < lvl; ++i) out += *o.indent;
  };
  if (v.isNone()) {
    out += "null";
  } else if (v.isBool()) {
    out += v.asBool() ? "true" : "false";
  } else if (v.isInt()) {
    out += std::to_string(v.asInt());
  } else if (v.isFloat()) {
    const double d = v.asDouble();
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : formatFloat(d);
  } else if (v.isString()) {
    dumpString(out, v.str(), o.ensureAscii);
  } else if (v.isList()) {
    if (v.items().empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (std::size_t i = 0; i < v.items().size(); ++i) {
      if (i) out += o.itemSeparator;
      newline(level + 1);
      dump(out, v.items()[i], o, level + 1);
    }
    newline(level);
    out += ']';
  } else if (v.isDict()) {
    if (v.dict().items.empty()) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& kv : v.dict().items) entries.push_back(&kv);
    if (o.sortKeys)  // Python sorts the keys themselves (mixed types fail), then converts them
      std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return compare(a->first, b->first) < 0; });
    out += '{';
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i) out += o.itemSeparator;
      newline(level + 1);
      dumpString(out, jsonKey(entries[i]->first), o.ensureAscii);
      out += o.keySeparator;
      dump(out, entries[i]->second, o, level + 1);
    }
    newline(level);
    out += '}';
  } else {
    throw Error("Object of type " + v.typeName() + " is not JSON serializable");
  }
}

}  // namespace

std::string dumpJson(const Value& value, const JsonOptions& options) {
  std::string out;
  dump(out, value, options, 0);
  return out;
}

}  // namespace gizml::llm::tmpl
