#include "llm/template/format.h"

#include <cmath>
#include <cstdio>

#include "gizml/error.h"
#include "llm/template/text.h"

namespace gizml::llm::tmpl {
namespace {

// A parsed format spec: [[fill]align][sign][#][0][width][,|_][.precision][type].
struct Spec {
  std::string fill = " ";
  char align = '\0', sign = '-', type = '\0', grouping = '\0';
  bool alternate = false;
  std::size_t width = 0;
  int precision = -1;
};

std::size_t parseNumber(const std::string& s, std::size_t& i, std::size_t max) {
  std::size_t n = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    n = n * 10 + static_cast<std::size_t>(s[i++] - '0');
    if (n > max) throw Error("format width or precision too large");
  }
  return n;
}

Spec parseSpec(Evaluator& ev, const std::string& s) {
  Spec spec;
  std::size_t i = 0;
  const auto isAlign = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  std::size_t after = 0;
  const std::string firstChar = s.empty() ? "" : s.substr(0, [&] {
    std::size_t p = 0;
    decodeAt(s, p);
    return p;
  }());
  after = firstChar.size();
  if (after < s.size() && isAlign(s[after])) {
    spec.fill = firstChar;
    spec.align = s[after];
    i = after + 1;
  } else if (!s.empty() && isAlign(s[0])) {
    spec.align = s[0];
    i = 1;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) spec.sign = s[i++];
  if (i < s.size() && s[i] == '#') spec.alternate = true, ++i;
  if (i < s.size() && s[i] == '0') {
    if (!spec.align) spec.fill.assign(1, '0'), spec.align = '=';
    ++i;
  }
  spec.width = parseNumber(s, i, ev.limits().maxOutputBytes);
  if (i < s.size() && (s[i] == ',' || s[i] == '_')) spec.grouping = s[i++];
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (i >= s.size() || s[i] < '0' || s[i] > '9') throw Error("Format specifier missing precision");
    spec.precision = static_cast<int>(parseNumber(s, i, 1000));
  }
  if (i < s.size()) spec.type = s[i++];
  if (i != s.size()) throw Error("Invalid format specifier '" + s + "'");
  return spec;
}

std::string group(const std::string& digits, char separator) {
  if (!separator) return digits;
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += separator;
    out += digits[i];
  }
  return out;
}

std::string padded(std::string sign, std::string body, const Spec& spec, char defaultAlign) {
  const std::size_t n = codePointCount(sign) + codePointCount(body);
  if (spec.width <= n) return sign + body;
  const char align = spec.align ? spec.align : defaultAlign;
  if (align == '=') {
    std::string fill;
    for (std::size_t i = n; i < spec.width; ++i) fill += spec.fill;
    return sign + fill + body;
  }
  return pyPad(sign + body, spec.width, spec.fill, align == '<' ? 'l' : align == '>' ? 'r' : 'c');
}

std::string formatNumber(const Value& v, const Spec& spec) {
  char type = spec.type;
  const bool isInt = (v.isInt() || v.isBool()) && type != 'f' && type != 'F' && type != 'e' && type != 'E' &&
                     type != 'g' && type != 'G' && type != '%';
  std::string body, sign;
  if (isInt) {
    const int64_t x = v.asInt();
    const uint64_t mag = x < 0 ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
    if (type == '\0' || type == 'd' || type == 'n') {
      body = group(std::to_string(mag), spec.grouping);
    } else if (type == 'x' || type == 'X' || type == 'o' || type == 'b') {
      const unsigned base = type == 'o' ? 8 : type == 'b' ? 2 : 16;
      const char* digits = type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
      for (uint64_t m = mag; m || body.empty(); m /= base) body.insert(body.begin(), digits[m % base]);
      if (spec.alternate) body = std::string("0") + (type == 'o' ? 'o' : type == 'b' ? 'b' : type) + body;
    } else if (type == 'c') {
      appendUtf8(body, static_cast<char32_t>(x));
      return padded("", body, spec, '<');
    } else {
      throw Error(std::string("Unknown format code '") + type + "' for object of type 'int'");
    }
    if (x < 0) sign.assign(1, '-');
  } else {
    const double d = v.asDouble();
    if (type == '\0' && spec.precision < 0) {
      body = formatFloat(std::fabs(d));
    } else {
      if (type == '\0') type = 'g';
      if (type != 'f' && type != 'F' && type != 'e' && type != 'E' && type != 'g' && type != 'G' && type != '%')
        throw Error(std::string("Unknown format code '") + type + "' for object of type 'float'");
      const int precision = spec.precision < 0 ? 6 : spec.precision;
      const double x = std::fabs(d) * (type == '%' ? 100 : 1);
      char buf[1100];
      const char conv = type == '%' ? 'f' : type;
      const char fmt[] = {'%', '.', '*', conv, '\0'};
      std::snprintf(buf, sizeof buf, fmt, precision, x);
      body = buf;
      if (spec.grouping) {
        const std::size_t end = body.find_first_not_of("0123456789");
        body = group(body.substr(0, end), spec.grouping) + (end == std::string::npos ? "" : body.substr(end));
      }
      if (type == '%') body += '%';
    }
    if (std::signbit(d) && !std::isnan(d)) sign.assign(1, '-');
  }
  if (sign.empty() && spec.sign != '-') sign = std::string(1, spec.sign);
  return padded(sign, body, spec, '>');
}

std::string formatValue(Evaluator& ev, const Value& v, const std::string& specText) {
  if (specText.empty()) return v.toString();
  const Spec spec = parseSpec(ev, specText);
  if (v.isNumber()) return formatNumber(v, spec);
  if (!v.isString()) throw Error("unsupported format string passed to " + v.typeName() + ".__format__");
  if (spec.type && spec.type != 's') throw Error(std::string("Unknown format code '") + spec.type + "' for object of type 'str'");
  if (spec.sign != '-' || spec.align == '=') throw Error("Sign not allowed in string format specifier");
  std::string s = v.str();
  if (spec.precision >= 0) {
    const std::vector<std::size_t> offsets = codePointOffsets(s);
    if (static_cast<std::size_t>(spec.precision) + 1 < offsets.size()) s.resize(offsets[static_cast<std::size_t>(spec.precision)]);
  }
  return padded("", s, spec, '<');
}

// The value a replacement field names: 0, name, 0.attr, name[key], ...
Value fieldValue(const std::string& field, const CallArgs& args, std::size_t& autoIndex, bool& manual) {
  std::size_t end = field.find_first_of(".[");
  const std::string head = field.substr(0, end);
  Value v;
  if (head.empty() || head.find_first_not_of("0123456789") == std::string::npos) {
    std::size_t index = 0;
    if (head.empty()) {
      if (manual) throw Error("cannot switch from manual field specification to automatic field numbering");
      index = autoIndex++;
    } else {
      if (autoIndex > 0) throw Error("cannot switch from automatic field numbering to manual field specification");
      manual = true;
      if (head.size() > 9) throw Error("Too many decimal digits in format string");
      index = std::stoul(head);
    }
    if (index >= args.args.size()) throw Error("Replacement index " + std::to_string(index) + " out of range for positional args tuple");
    v = args.args[index];
  } else {
    const Value* kw = nullptr;
    for (const auto& [key, value] : args.kwargs)
      if (key == head) kw = &value;
    if (!kw) throw Error("KeyError: '" + head + "'");
    v = *kw;
  }
  while (end != std::string::npos) {
    if (field[end] == '.') {
      const std::size_t next = field.find_first_of(".[", end + 1);
      const std::string name = field.substr(end + 1, next == std::string::npos ? std::string::npos : next - end - 1);
      if (!name.empty() && name[0] == '_') throw Error("access to attribute '" + name + "' is unsafe.");
      v = getAttr(v, name);
      end = next;
    } else {
      const std::size_t close = field.find(']', end);
      if (close == std::string::npos) throw Error("Missing ']' in format string");
      const std::string key = field.substr(end + 1, close - end - 1);
      const bool digits = !key.empty() && key.size() < 18 && key.find_first_not_of("0123456789") == std::string::npos;
      v = getItem(v, digits ? Value(static_cast<int64_t>(std::stoll(key))) : Value(key));
      end = close + 1 < field.size() ? close + 1 : std::string::npos;
      if (end != std::string::npos && field[end] != '.' && field[end] != '[')
        throw Error("Only '.' or '[' may follow ']' in format field specifier");
    }
  }
  if (v.isUndefined()) undefinedError(v);
  return v;
}

}  // namespace

std::string pyFormat(Evaluator& ev, const std::string& fmt, const CallArgs& args) {
  std::string out;
  std::size_t autoIndex = 0;
  bool manual = false;
  for (std::size_t i = 0; i < fmt.size();) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}', i += 2;
        continue;
      }
      throw Error("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c, ++i;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{', i += 2;
      continue;
    }
    // A replacement field; a nested {} inside the spec is one level deep in Python.
    std::size_t j = i + 1;
    int depth = 1;
    for (; j < fmt.size() && depth > 0; ++j) depth += fmt[j] == '{' ? 1 : fmt[j] == '}' ? -1 : 0;
    if (depth > 0) throw Error("expected '}' before end of string");
    std::string field = fmt.substr(i + 1, j - i - 2);
    i = j;
    std::string spec;
    const std::size_t colon = field.find(':');
    if (colon != std::string::npos) spec = field.substr(colon + 1), field.resize(colon);
    if (spec.find('{') != std::string::npos) throw Error("nested replacement fields are not supported");
    char conversion = '\0';
    const std::size_t bang = field.find('!');
    if (bang != std::string::npos) {
      if (bang + 2 != field.size()) throw Error("expected ':' after conversion specifier");
      conversion = field[bang + 1];
      field.resize(bang);
    }
    Value v = fieldValue(field, args, autoIndex, manual);
    if (conversion == 'r' || conversion == 'a') v = Value(v.repr());
    else if (conversion == 's') v = Value(v.toString());
    else if (conversion) throw Error(std::string("Unknown conversion specifier ") + conversion);
    out += formatValue(ev, v, spec);
    ev.checkSize(out.size());
  }
  return out;
}

std::string pyPercent(Evaluator& ev, const std::string& fmt, const Value& values) {
  const bool positional = values.isList() && values.listData().tuple;
  const std::vector<Value> single{values};
  const std::vector<Value>& items = positional ? values.items() : single;
  std::size_t next = 0;
  bool usedMapping = false;
  std::string out;
  for (std::size_t i = 0; i < fmt.size();) {
    if (fmt[i] != '%') {
      out += fmt[i++];
      continue;
    }
    if (++i >= fmt.size()) throw Error("incomplete format");
    Value v;
    bool haveValue = false;
    if (fmt[i] == '(') {
      const std::size_t close = fmt.find(')', i);
      if (close == std::string::npos) throw Error("incomplete format key");
      if (!values.isDict()) throw Error("format requires a mapping");
      const Value* found = values.dict().find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!found) throw Error("KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
      v = *found;
      haveValue = usedMapping = true;
      i = close + 1;
    }
    Spec spec;
    spec.align = '>';
    for (; i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos; ++i) {
      if (fmt[i] == '-') spec.align = '<';
      else if (fmt[i] == '+' || (fmt[i] == ' ' && spec.sign != '+')) spec.sign = fmt[i];
      else if (fmt[i] == '#') spec.alternate = true;
      else if (fmt[i] == '0' && spec.align != '<') spec.fill.assign(1, '0');
    }
    spec.width = parseNumber(fmt, i, ev.limits().maxOutputBytes);
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      spec.precision = static_cast<int>(parseNumber(fmt, i, 1000));
    }
    if (i >= fmt.size()) throw Error("incomplete format");
    const char type = fmt[i++];
    if (type == '%') {
      out += '%';
      continue;
    }
    if (!haveValue) {
      if (next >= items.size()) throw Error("not enough arguments for format string");
      v = items[next++];
    }
    if (type == 's' || type == 'r' || type == 'a') {
      std::string s = type == 's' ? v.toString() : v.repr();
      if (spec.precision >= 0) {
        const std::vector<std::size_t> offsets = codePointOffsets(s);
        if (static_cast<std::size_t>(spec.precision) + 1 < offsets.size()) s.resize(offsets[static_cast<std::size_t>(spec.precision)]);
      }
      spec.fill.assign(1, ' ');
      out += padded("", s, spec, '>');
    } else if (std::string_view("diuxXofFeEgGc").find(type) != std::string_view::npos) {
      if (!v.isNumber()) throw Error(std::string("%") + type + " format: a real number is required, not " + v.typeName());
      if (spec.fill == "0") spec.align = '=';
      spec.type = type == 'i' || type == 'u' ? 'd' : type;
      if (spec.type == 'd' || spec.type == 'x' || spec.type == 'X' || spec.type == 'o') {
        const double d = v.asDouble();
        if (v.isFloat() && (!std::isfinite(d) || std::fabs(d) >= 9.2e18)) throw Error("cannot convert float to integer");
        v = v.isFloat() ? Value(static_cast<int64_t>(d)) : Value(v.asInt());
        spec.alternate = spec.alternate && spec.type != 'd';
      }
      out += formatNumber(v, spec);
    } else {
      throw Error(std::string("unsupported format character '") + type + "'");
    }
    ev.checkSize(out.size());
  }
  // Python takes any non-string value with __getitem__ (list, dict, undefined) as a mapping,
  // which may go unused.
  const bool mappingLike = !values.isString() && (values.isList() || values.isDict() || values.isUndefined());
  if (positional ? next < items.size() : (!usedMapping && next == 0 && !mappingLike))
    throw Error("not all arguments converted during string formatting");
  return out;
}

}  // namespace gizml::llm::tmpl
