#include "llm/template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "gizml/error.h"
#include "llm/template/text.h"

namespace gizml::llm::tmpl {

const Value* DictData::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (equals(k, key)) return &v;
  return nullptr;
}

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.isString() && k.str() == key) return &v;
  return nullptr;
}

void DictData::set(Value key, Value value) {
  key.checkHashable();
  for (auto& [k, v] : items)
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  items.emplace_back(std::move(key), std::move(value));
}

static int childDepth(const Value& v) {
  if (v.depth() >= kMaxNesting) throw Error("values nested deeper than " + std::to_string(kMaxNesting));
  return v.depth() + 1;
}

Value::Value(ListData list) {
  list.depth = 1;
  for (const Value& v : list.items) list.depth = std::max(list.depth, childDepth(v));
  data_ = std::make_shared<const ListData>(std::move(list));
}

Value::Value(DictData dict) {
  dict.depth = 1;
  for (const auto& [key, value] : dict.items) dict.depth = std::max({dict.depth, childDepth(key), childDepth(value)});
  data_ = std::make_shared<const DictData>(std::move(dict));
}

Value Value::fromJson(const nlohmann::ordered_json& json, int depth) {
  // Requests bring these values (messages, tools, chat_template_kwargs): check before recursing.
  if ((json.is_array() || json.is_object()) && depth >= kMaxNesting)
    throw Error("template values nested deeper than " + std::to_string(kMaxNesting) + " levels");
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: return Value(None{});
    case nlohmann::ordered_json::value_t::boolean: return Value(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = json.get<uint64_t>();
      // Beyond int64 Python would keep an exact int; a float is the closest we hold.
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(json.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(fromJson(item, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      DictData dict;
      dict.items.reserve(json.size());
      for (const auto& [key, item] : json.items()) dict.items.emplace_back(Value(key), fromJson(item, depth + 1));
      return Value(std::move(dict));
    }
    default: throw Error("chat template: unsupported JSON value (binary)");
  }
}

bool Value::truthy() const {
  if (isBool()) return asBool();
  if (isInt()) return asInt() != 0;
  if (isFloat()) return std::get<double>(data_) != 0.0;
  if (isString()) return !str().empty();
  if (isList()) return !items().empty();
  if (isDict()) return !dict().items.empty();
  return isCallable() || isNamespace();
}

std::string formatFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  // Shortest round-trip digits in scientific form, then laid out the way Python's repr does.
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);
  const std::size_t e = sci.find('e');
  const int exp = std::atoi(sci.c_str() + e + 1);
  std::string mantissa = sci.substr(0, e);
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string out = negative ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out.append(".").append(digits, 1);
    char expbuf[16];
    std::snprintf(expbuf, sizeof expbuf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + expbuf;
  }
  if (exp < 0) return out + "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
  const std::size_t intDigits = static_cast<std::size_t>(exp) + 1;
  if (digits.size() <= intDigits) return out + digits + std::string(intDigits - digits.size(), '0') + ".0";
  return out + digits.substr(0, intDigits) + "." + digits.substr(intDigits);
}

static std::string reprString(const std::string& s) {
  const bool useDouble = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char quote = useDouble ? '"' : '\'';
  std::string out(1, quote);
  for (std::size_t pos = 0; pos < s.size();) {
    const std::size_t start = pos;
    const char32_t c = decodeAt(s, pos);
    char buf[16];
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<char32_t>(quote)) out += std::string("\\") + quote;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || (c >= 0x7F && c < 0xA0) || (pos - start == 1 && c >= 0x80)) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out.append(s, start, pos - start);
    }
  }
  return out + quote;
}

std::string Value::repr() const {
  if (isMarkup()) return "Markup(" + reprString(str()) + ")";
  if (isString()) return reprString(str());
  if (isList()) {
    const ListData& l = listData();
    std::string out = l.view ? std::string(l.view) + "([" : l.tuple ? "(" : "[";
    for (std::size_t i = 0; i < l.items.size(); ++i) out += (i ? ", " : "") + l.items[i].repr();
    if (l.tuple && l.items.size() == 1) out += ",";
    return out + (l.view ? "])" : l.tuple ? ")" : "]");
  }
  if (isDict()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, v] : dict().items) {
      out += (first ? "" : ", ") + k.repr() + ": " + v.repr();
      first = false;
    }
    return out + "}";
  }
  if (isUndefined()) return "Undefined";  // as jinja2's Undefined prints inside a list
  return toString();
}

std::string Value::toString() const {
  if (isUndefined()) return "";
  if (isNone()) return "None";
  if (isBool()) return asBool() ? "True" : "False";
  if (isInt()) return std::to_string(asInt());
  if (isFloat()) return formatFloat(std::get<double>(data_));
  if (isString()) return str();
  if (isCallable()) return "<callable " + callable().name + ">";
  if (isNamespace()) {
    // Namespaces may contain themselves: print nested ones shallowly.
    static thread_local int nesting = 0;
    if (nesting > 4) return "<Namespace ...>";
    ++nesting;
    std::string out;
    try {
      out = "<Namespace " + Value(DictData(ns()->attrs)).repr() + ">";
    } catch (...) {
      --nesting;
      throw;
    }
    --nesting;
    return out;
  }
  return repr();
}

std::string Value::typeName() const {
  if (isUndefined()) return "Undefined";
  if (isNone()) return "NoneType";
  if (isBool()) return "bool";
  if (isInt()) return "int";
  if (isFloat()) return "float";
  if (isString()) return isMarkup() ? "Markup" : "str";
  if (isList()) return listData().view ? listData().view : listData().tuple ? "tuple" : "list";
  if (isDict()) return "dict";
  if (isCallable()) return "function";
  return "Namespace";
}

void Value::checkHashable() const {
  if (isList() && listData().tuple) {
    for (const Value& item : items()) item.checkHashable();
  } else if (isList() || isDict()) {
    throw Error("unhashable type: '" + typeName() + "'");
  }
}

std::string escapeHtml(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string escapedText(const Value& v) { return v.isMarkup() ? v.str() : escapeHtml(v.toString()); }

bool equals(const Value& a, const Value& b) {
  if (a.isNumber() && b.isNumber()) {
    if (a.isFloat() || b.isFloat()) return a.asDouble() == b.asDouble();
    return a.asInt() == b.asInt();
  }
  if (a.isString() && b.isString()) return a.str() == b.str();
  if (a.isList() && b.isList()) {
    if (a.listData().tuple != b.listData().tuple || a.items().size() != b.items().size()) return false;
    for (std::size_t i = 0; i < a.items().size(); ++i)
      if (!equals(a.items()[i], b.items()[i])) return false;
    return true;
  }
  if (a.isDict() && b.isDict()) {
    if (a.dict().items.size() != b.dict().items.size()) return false;
    for (const auto& [k, v] : a.dict().items) {
      const Value* other = b.dict().find(k);
      if (!other || !equals(v, *other)) return false;
    }
    return true;
  }
  if (a.isNone() && b.isNone()) return true;
  if (a.isUndefined() && b.isUndefined()) return true;
  if (a.isCallable() && b.isCallable()) return &a.callable() == &b.callable();
  if (a.isNamespace() && b.isNamespace()) return a.ns() == b.ns();
  return false;
}

int compare(const Value& a, const Value& b) {
  if (a.isNumber() && b.isNumber()) {
    if (a.isFloat() || b.isFloat()) {
      const double x = a.asDouble(), y = b.asDouble();
      return x < y ? -1 : x > y ? 1 : 0;  // NaN compares equal here; Python says all false
    }
    return a.asInt() < b.asInt() ? -1 : a.asInt() > b.asInt() ? 1 : 0;
  }
  if (a.isString() && b.isString()) {
    const int c = a.str().compare(b.str());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.isList() && b.isList() && a.listData().tuple == b.listData().tuple) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equals(x[i], y[i])) return compare(x[i], y[i]);
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  if (a.isUndefined() || b.isUndefined()) throw Error((a.isUndefined() ? a : b).undefinedMessage());
  throw Error("'<' not supported between instances of '" + a.typeName() + "' and '" + b.typeName() + "'");
}

}  // namespace gizml::llm::tmpl
