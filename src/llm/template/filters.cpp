// Jinja's builtin filters that chat templates use, plus transformers' tojson (json.dumps).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "gizml/error.h"
#include "llm/template/builtins.h"
#include "llm/template/format.h"
#include "llm/template/json_dump.h"
#include "llm/template/text.h"

namespace gizml::llm::tmpl {
namespace {

using Args = CallArgs;

// Filters that call a str method keep Markup as Markup (markupsafe wraps those methods).
Value sameKind(const Value& input, std::string s) {
  return input.isMarkup() ? Value::markup(std::move(s)) : Value(std::move(s));
}

// transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
Value tojson(Evaluator& ev, const Value& v, Args& a) {
  JsonOptions o;
  o.ensureAscii = boolArg(a, 0, "ensure_ascii", false);
  const Value indent = arg(a, 1, "indent", Value(None{}));
  if (indent.isString()) {
    o.indent = indent.str();
  } else if (indent.isInt() || indent.isBool()) {
    const int64_t n = std::min<int64_t>(indent.asInt(), 4096);
    o.indent = std::string(static_cast<std::size_t>(std::max<int64_t>(n, 0)), ' ');
  } else if (!indent.isNone()) {
    throw Error("tojson: indent must be an integer or a string");
  }
  if (o.indent) o.itemSeparator = ",";
  const Value separators = arg(a, 2, "separators", Value(None{}));
  if (!separators.isNone()) {
    if (!separators.isList() || separators.items().size() != 2 || !separators.items()[0].isString() ||
        !separators.items()[1].isString())
      throw Error("tojson: separators must be a pair of strings");
    o.itemSeparator = separators.items()[0].str();
    o.keySeparator = separators.items()[1].str();
  }
  o.sortKeys = boolArg(a, 3, "sort_keys", false);
  o.maxBytes = ev.limits().maxOutputBytes;
  std::string out = dumpJson(v, o);
  ev.checkSize(out.size());
  return out;
}

Value length(Evaluator&, const Value& v, Args&) {
  if (v.isString()) return static_cast<int64_t>(codePointCount(v.str()));
  if (v.isList()) return static_cast<int64_t>(v.items().size());
  if (v.isDict()) return static_cast<int64_t>(v.dict().items.size());
  if (v.isNamespace()) return static_cast<int64_t>(v.ns()->attrs.items.size());
  if (v.isUndefined()) return int64_t{0};
  throw Error("object of type '" + v.typeName() + "' has no len()");
}

Value join(Evaluator& ev, const Value& v, Args& a) {
  const std::string sep = strArg(a, 0, "d", "");
  const Value attribute = arg(a, 1, "attribute", Value(None{}));
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    out += (attribute.isNone() ? item : getAttrPath(item, attribute.toString())).toString();
    ev.checkSize(out.size());
    first = false;
  }
  return out;
}

Value defaultFilter(Evaluator&, const Value& v, Args& a) {
  const bool boolean = boolArg(a, 1, "boolean", false);
  if (v.isUndefined() || (boolean && !v.truthy())) return arg(a, 0, "default_value", Value(""));
  return v;
}

Value first(Evaluator&, const Value& v, Args&) {
  const std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value last(Evaluator&, const Value& v, Args&) {
  const std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

// The rest of a map/select call after the filter or test name.
Args restArgs(const Args& a, std::size_t from) {
  Args rest;
  for (std::size_t i = from; i < a.args.size(); ++i) rest.args.push_back(a.args[i]);
  return rest;
}

Value map(Evaluator& ev, const Value& v, Args& a) {
  std::vector<Value> out;
  if (!v.truthy()) return Value::list({});  // jinja2 looks at nothing else for none or empty input
  const Value* attribute = findArg(a, SIZE_MAX, "attribute");
  if (attribute) {
    const Value fallback = arg(a, SIZE_MAX, "default");
    for (const Value& item : iterate(v)) {
      ev.step();
      Value x = getAttrPath(item, attribute->toString());
      out.push_back(x.isUndefined() && !fallback.isUndefined() ? fallback : x);
    }
    return Value::list(std::move(out));
  }
  if (a.args.empty()) throw Error("map: expected a filter name or attribute=");
  const FilterFn fn = findFilter(a.args[0].toString());
  if (!fn) throw Error("map: no filter named '" + a.args[0].toString() + "'");
  Args rest = restArgs(a, 1);
  rest.kwargs = a.kwargs;
  for (const Value& item : iterate(v)) {
    ev.step();
    out.push_back(fn(ev, item, rest));
  }
  return Value::list(std::move(out));
}

// select/reject/selectattr/rejectattr: keep items whose (attribute's) test result is `keep`.
Value selectImpl(Evaluator& ev, const Value& v, Args& a, bool byAttribute, bool keep) {
  if (!v.truthy()) return Value::list({});  // jinja2 looks at nothing else for none or empty input
  std::size_t next = 0;
  std::string attribute;
  if (byAttribute) {
    if (a.args.empty()) throw Error("selectattr/rejectattr: expected an attribute name");
    attribute = a.args[next++].toString();
  }
  TestFn test = nullptr;
  if (next < a.args.size()) {
    test = findTest(a.args[next].toString());
    if (!test) throw Error("no test named '" + a.args[next].toString() + "'");
    ++next;
  }
  Args rest = restArgs(a, next);
  std::vector<Value> out;
  for (const Value& item : iterate(v)) {
    ev.step();
    const Value x = byAttribute ? getAttrPath(item, attribute) : item;
    if ((test ? test(ev, x, rest) : x.truthy()) == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value toInt(Evaluator&, const Value& v, Args& a) {
  if (v.isUndefined()) undefinedError(v);  // int(Undefined) fails in Python
  const Value fallback = arg(a, 0, "default", Value(int64_t{0}));
  if (v.isInt() || v.isBool()) return v.asInt();
  if (v.isFloat()) {
    const double d = v.asDouble();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return static_cast<int64_t>(d);
  }
  if (!v.isString()) return fallback;
  const std::string s = pyStrip(v.str(), nullptr, true, true);
  const int64_t base = intArg(a, 1, "base", 10);
  if (s.empty() || base < 2 || base > 36) return fallback;
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(s.c_str(), &end, static_cast<int>(base));
  if (errno == 0 && end && *end == '\0') return static_cast<int64_t>(n);
  // Jinja retries through float: int("3.7") fails but the filter gives 3.
  errno = 0;
  const double d = std::strtod(s.c_str(), &end);
  if (errno == 0 && end && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
  return fallback;
}

Value toFloat(Evaluator&, const Value& v, Args& a) {
  if (v.isUndefined()) undefinedError(v);
  const Value fallback = arg(a, 0, "default", Value(0.0));
  if (v.isNumber()) return v.asDouble();
  if (!v.isString()) return fallback;
  const std::string s = pyStrip(v.str(), nullptr, true, true);
  if (s.empty() || s.find_first_of("xXpP") != std::string::npos) return fallback;  // no C hex floats
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  return end && *end == '\0' ? Value(d) : fallback;
}

Value roundFilter(Evaluator&, const Value& v, Args& a) {
  if (!v.isNumber()) throw Error("round: expected a number, got " + v.typeName());
  const int64_t precision = std::clamp<int64_t>(intArg(a, 0, "precision", 0), -308, 308);
  const std::string method = strArg(a, 1, "method", "common");
  if (method == "common") {
    if (!v.isFloat()) return v.asInt();  // Python's round() keeps ints
    const double d = v.asDouble();
    if (!std::isfinite(d) || precision < 0) return std::nearbyint(d * std::pow(10.0, static_cast<double>(precision))) /
                                                 std::pow(10.0, static_cast<double>(precision));
    // printf rounds the exact binary value half-to-even, as Python's round() does.
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), d);
    return std::strtod(buf, nullptr);
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  if (method == "ceil") return std::ceil(v.asDouble() * scale) / scale;
  if (method == "floor") return std::floor(v.asDouble() * scale) / scale;
  throw Error("round: method must be 'common', 'ceil' or 'floor'");
}

Value replace(Evaluator& ev, const Value& v, Args& a) {
  const std::string s = v.toString(), from = strArg(a, 0, "old", ""), to = strArg(a, 1, "new", "");
  const int64_t count = intArg(a, 2, "count", -1);
  // Bound the result before building it.
  const std::size_t occurrences = from.empty() ? codePointCount(s) + 1 : [&] {
    std::size_t n = 0;
    for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + from.size())) ++n;
    return n;
  }();
  if (to.size() > from.size() && occurrences > 0)
    ev.checkSize(to.size() - from.size() > ev.limits().maxOutputBytes / occurrences
                     ? SIZE_MAX
                     : s.size() + occurrences * (to.size() - from.size()));
  return pyReplace(s, from, to, count < 0 ? -1 : static_cast<long>(std::min<int64_t>(count, LONG_MAX)));
}

Value items(Evaluator&, const Value& v, Args&) {
  if (v.isUndefined()) return Value::list({});
  if (!v.isDict()) throw Error("items: can only get item pairs from a mapping, not " + v.typeName());
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict().items) out.push_back(Value::list({k, x}, true));
  return Value::list(std::move(out));
}

// Sort key handling shared by sort, dictsort, unique, min and max.
Value sortKey(const Value& v, bool caseSensitive) {
  return !caseSensitive && v.isString() ? Value(asciiLower(v.str())) : v;
}

Value dictsort(Evaluator&, const Value& v, Args& a) {
  if (!v.isDict()) throw Error("dictsort: expected a mapping, got " + v.typeName());
  const bool caseSensitive = boolArg(a, 0, "case_sensitive", false);
  const std::string by = strArg(a, 1, "by", "key");
  const bool reverse = boolArg(a, 2, "reverse", false);
  if (by != "key" && by != "value") throw Error("dictsort: 'by' must be 'key' or 'value'");
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict().items) out.push_back(Value::list({k, x}, true));
  const std::size_t pos = by == "key" ? 0 : 1;
  std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
    const int c = compare(sortKey(x.items()[pos], caseSensitive), sortKey(y.items()[pos], caseSensitive));
    return reverse ? c > 0 : c < 0;
  });
  return Value::list(std::move(out));
}

Value sort(Evaluator&, const Value& v, Args& a) {
  const bool reverse = boolArg(a, 0, "reverse", false), caseSensitive = boolArg(a, 1, "case_sensitive", false);
  const Value attribute = arg(a, 2, "attribute", Value(None{}));
  std::vector<Value> out = iterate(v);
  const auto key = [&](const Value& x) {
    return sortKey(attribute.isNone() ? x : getAttrPath(x, attribute.toString()), caseSensitive);
  };
  // jinja2 sorts by one-item lists of keys, which compare equal items (undefined ones too) as equal.
  std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
    const Value kx = key(x), ky = key(y);
    const int c = equals(kx, ky) ? 0 : compare(kx, ky);
    return reverse ? c > 0 : c < 0;
  });
  return Value::list(std::move(out));
}

Value unique(Evaluator&, const Value& v, Args& a) {
  const bool caseSensitive = boolArg(a, 0, "case_sensitive", false);
  const Value attribute = arg(a, 1, "attribute", Value(None{}));
  std::vector<Value> out, seen;
  for (const Value& item : iterate(v)) {
    const Value key = sortKey(attribute.isNone() ? item : getAttrPath(item, attribute.toString()), caseSensitive);
    key.checkHashable();  // jinja2 keeps a set of the keys seen
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::list(std::move(out));
}

Value extreme(const Value& v, Args& a, bool wantMax) {
  const bool caseSensitive = boolArg(a, 0, "case_sensitive", false);
  const Value attribute = arg(a, 1, "attribute", Value(None{}));
  const std::vector<Value> all = iterate(v);
  if (all.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const auto key = [&](const Value& x) {
    return sortKey(attribute.isNone() ? x : getAttrPath(x, attribute.toString()), caseSensitive);
  };
  const Value* best = &all[0];
  for (std::size_t i = 1; i < all.size(); ++i) {
    const int c = compare(key(all[i]), key(*best));
    if (wantMax ? c > 0 : c < 0) best = &all[i];
  }
  return *best;
}

Value sum(Evaluator& ev, const Value& v, Args& a) {
  const Value attribute = arg(a, 0, "attribute", Value(None{}));
  Value total = arg(a, 1, "start", Value(int64_t{0}));
  for (const Value& x : iterate(v))
    total = binaryOp(ev, "+", total, attribute.isNone() ? x : getAttrPath(x, attribute.toString()));
  return total;
}

Value batch(Evaluator&, const Value& v, Args& a) {
  const int64_t size = intArg(a, 0, "linecount", 1);
  if (size <= 0) throw Error("batch: linecount must be positive");
  const Value* fill = findArg(a, 1, "fill_with");
  std::vector<Value> out, current;
  for (const Value& x : iterate(v)) {
    current.push_back(x);
    if (static_cast<int64_t>(current.size()) == size) out.push_back(Value::list(std::exchange(current, {})));
  }
  if (!current.empty()) {
    if (fill && !fill->isNone())
      while (static_cast<int64_t>(current.size()) < size) current.push_back(*fill);
    out.push_back(Value::list(std::move(current)));
  }
  return Value::list(std::move(out));
}

Value indent(Evaluator& ev, const Value& v, Args& a) {
  if (v.isUndefined()) undefinedError(v);
  if (!v.isString()) throw Error("indent: expected a string, got " + v.typeName());  // jinja2 appends "\n" to it
  const Value width = arg(a, 0, "width", Value(int64_t{4}));
  const std::string pad = width.isString() ? width.str()
                                            : std::string(static_cast<std::size_t>(std::clamp<int64_t>(
                                                              width.isNumber() ? width.asInt() : 4, 0, 4096)),
                                                          ' ');
  const bool firstLine = boolArg(a, 1, "first", false), blank = boolArg(a, 2, "blank", false);
  // Jinja appends a newline and splits lines, so a trailing newline survives unindented.
  const std::string s = v.toString() + "\n";
  std::vector<std::string> lines;
  for (std::size_t start = 0, nl; (nl = s.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(s.substr(start, nl - start));
  ev.checkSize(s.size() + (lines.size() + 1) * pad.size());
  std::string out = lines[0];
  for (std::size_t i = 1; i < lines.size(); ++i) out += "\n" + (blank || !lines[i].empty() ? pad : "") + lines[i];
  return sameKind(v, firstLine ? pad + out : out);
}

Value wordcount(Evaluator&, const Value& v, Args&) {
  const std::string s = v.toString();
  int64_t words = 0;
  bool inWord = false;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    const bool word = std::isalnum(u) || c == '_' || u >= 0x80;
    if (word && !inWord) ++words;
    inWord = word;
  }
  return words;
}

Value reverse(Evaluator&, const Value& v, Args&) {
  if (v.isString()) {
    const std::vector<std::size_t> offsets = codePointOffsets(v.str());
    std::string out;
    for (std::size_t i = offsets.size() - 1; i > 0; --i) out.append(v.str(), offsets[i - 1], offsets[i] - offsets[i - 1]);
    return out;
  }
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value escape(Evaluator&, const Value& v, Args&) { return Value::markup(escapedText(v)); }

Value format(Evaluator& ev, const Value& v, Args& a) {
  if (!a.args.empty() && !a.kwargs.empty()) throw Error("can't handle positional and keyword arguments at the same time");
  Value values = Value::list(a.args, true);
  if (!a.kwargs.empty()) {
    DictData d;
    for (const auto& [key, value] : a.kwargs) d.set(key, value);
    values = Value(std::move(d));
  }
  return binaryOp(ev, "%", v.isString() ? v : Value(v.toString()), values);
}

Value center(Evaluator& ev, const Value& v, Args& a) {
  const int64_t width = std::max<int64_t>(intArg(a, 0, "width", 80), 0);
  ev.checkSize(static_cast<uint64_t>(width) > ev.limits().maxOutputBytes ? SIZE_MAX : static_cast<std::size_t>(width));
  return sameKind(v, pyPad(v.toString(), static_cast<std::size_t>(width), " ", 'c'));
}

// getattr() only: unlike a.b, attr never falls back to the item of that name.
Value attr(Evaluator&, const Value& v, Args& a) {
  const std::string name = strArg(a, 0, "name", "");
  if (v.isUndefined()) undefinedError(v);
  if (v.isNamespace()) return getAttr(v, name);
  if (std::optional<Value> method = findMethod(v, name)) return *method;
  return Value::undefined(std::string("'") + v.typeName() + " object' has no attribute '" + name + "'");
}

Value truncate(Evaluator& ev, const Value& v, Args& a) {
  if (!v.isString()) {  // jinja2 takes len() of the value and returns a short one as it is
    const int64_t n = static_cast<int64_t>(length(ev, v, a).asInt());
    if (n <= intArg(a, 0, "length", 255) + intArg(a, 3, "leeway", 5)) return v;
    throw Error("truncate: expected a string, got " + v.typeName());
  }
  const std::string s = v.toString();
  const int64_t length = intArg(a, 0, "length", 255);
  const bool killwords = boolArg(a, 1, "killwords", false);
  const std::string end = strArg(a, 2, "end", "...");
  const int64_t leeway = intArg(a, 3, "leeway", 5);
  const auto endLength = static_cast<int64_t>(codePointCount(end));
  if (length < endLength) throw Error("expected length >= " + std::to_string(endLength) + ", got " + std::to_string(length));
  if (leeway < 0) throw Error("expected leeway >= 0, got " + std::to_string(leeway));
  const std::vector<std::size_t> offsets = codePointOffsets(s);
  const auto n = static_cast<int64_t>(offsets.size()) - 1;
  if (n <= length + leeway) return s;
  std::string kept = s.substr(0, offsets[static_cast<std::size_t>(length - endLength)]);
  if (!killwords) {
    const std::size_t space = kept.rfind(' ');
    if (space != std::string::npos) kept.resize(space);
  }
  return kept + end;
}

Value filesizeformat(Evaluator& ev, const Value& v, Args& a) {
  Args noDefault;
  noDefault.args.push_back(Value());  // float(value) raises where |float would fall back
  const Value number = v.isUndefined() ? v : toFloat(ev, v, noDefault);
  if (number.isUndefined()) throw Error("filesizeformat: could not convert " + v.repr() + " to float");
  const double bytes = number.asDouble();
  const bool binary = boolArg(a, 0, "binary", false);
  const double base = binary ? 1024 : 1000;
  static const char* const kDecimal[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  static const char* const kBinary[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  if (bytes == 1) return "1 Byte";
  if (bytes < base) return std::to_string(static_cast<int64_t>(bytes)) + " Bytes";
  double unit = base;
  for (int i = 0; i < 8; ++i) {
    unit *= base;
    if (bytes < unit || i == 7) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.1f %s", base * bytes / unit, binary ? kBinary[i] : kDecimal[i]);
      return std::string(buf);
    }
  }
  return Value();
}

// urllib's quote(): unreserved bytes stay, the rest is %XX; query parts write spaces as '+'.
std::string urlQuote(const std::string& s, bool forQuery) {
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '_' || c == '.' || c == '-' || c == '~' || (c == '/' && !forQuery)) {
      out += c;
    } else if (c == ' ' && forQuery) {
      out += '+';
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", u);
      out += buf;
    }
  }
  return out;
}

Value urlencode(Evaluator&, const Value& v, Args&) {
  if (v.isString() || !(v.isList() || v.isDict() || v.isUndefined())) return urlQuote(v.toString(), false);
  std::string out;
  const auto pair = [&](const Value& k, const Value& x) {
    out += (out.empty() ? "" : "&") + urlQuote(k.toString(), true) + "=" + urlQuote(x.toString(), true);
  };
  if (v.isDict()) {
    for (const auto& [k, x] : v.dict().items) pair(k, x);
  } else {
    for (const Value& item : iterate(v)) {
      const std::vector<Value> kv = iterate(item);
      if (kv.size() != 2) throw Error("urlencode: expected pairs");
      pair(kv[0], kv[1]);
    }
  }
  return out;
}

Value xmlattr(Evaluator&, const Value& v, Args& a) {
  if (!v.isDict()) throw Error("xmlattr: expected a mapping, got " + v.typeName());
  std::string out;
  for (const auto& [k, x] : v.dict().items) {
    if (x.isNone() || x.isUndefined()) continue;
    const std::string key = k.toString();
    if (key.find_first_of(" \t\n\r\f\v/>=") != std::string::npos)
      throw Error("Invalid character in attribute name: " + k.repr());
    out += (out.empty() ? "" : " ") + escapedText(k) + "=\"" + escapedText(x) + "\"";
  }
  return boolArg(a, 0, "autospace", true) && !out.empty() ? " " + out : out;
}

Value sliceFilter(Evaluator& ev, const Value& v, Args& a) {
  const int64_t slices = intArg(a, 0, "slices", 1);
  if (slices <= 0) throw Error("slice: the number of slices must be positive");
  ev.checkItems(static_cast<std::size_t>(slices));
  const Value fill = arg(a, 1, "fill_with", Value(None{}));
  const std::vector<Value> seq = iterate(v);
  const auto length = static_cast<int64_t>(seq.size());
  const int64_t perSlice = length / slices, withExtra = length % slices;
  std::vector<Value> out;
  int64_t offset = 0;
  for (int64_t k = 0; k < slices; ++k) {
    const int64_t start = offset + k * perSlice;
    if (k < withExtra) ++offset;
    const int64_t end = offset + (k + 1) * perSlice;
    std::vector<Value> part(seq.begin() + start, seq.begin() + end);
    if (!fill.isNone() && k >= withExtra) part.push_back(fill);
    out.push_back(Value::list(std::move(part)));
  }
  return Value::list(std::move(out));
}

Value absFilter(Evaluator&, const Value& v, Args&) {
  if (v.isFloat()) return std::fabs(v.asDouble());
  if (v.isInt() || v.isBool()) {
    if (v.asInt() == INT64_MIN) throw Error("integer overflow");
    return v.asInt() < 0 ? -v.asInt() : v.asInt();
  }
  throw Error("bad operand type for abs(): '" + v.typeName() + "'");
}

struct Entry {
  const char* name;
  FilterFn fn;
};

const Entry kFilters[] = {
    {"tojson", tojson},
    {"length", length},
    {"count", length},
    {"trim", [](Evaluator&, const Value& v, Args& a) {
       const Value chars = arg(a, 0, "chars", Value(None{}));
       const std::string set = chars.isNone() ? "" : chars.toString();
       return sameKind(v, pyStrip(v.toString(), chars.isNone() ? nullptr : &set, true, true));
     }},
    {"join", join},
    {"default", defaultFilter},
    {"d", defaultFilter},
    {"first", first},
    {"last", last},
    {"map", map},
    {"select", [](Evaluator& ev, const Value& v, Args& a) { return selectImpl(ev, v, a, false, true); }},
    {"reject", [](Evaluator& ev, const Value& v, Args& a) { return selectImpl(ev, v, a, false, false); }},
    {"selectattr", [](Evaluator& ev, const Value& v, Args& a) { return selectImpl(ev, v, a, true, true); }},
    {"rejectattr", [](Evaluator& ev, const Value& v, Args& a) { return selectImpl(ev, v, a, true, false); }},
    {"list", [](Evaluator&, const Value& v, Args&) { return Value::list(iterate(v)); }},
    {"string", [](Evaluator&, const Value& v, Args&) { return v.isMarkup() ? v : Value(v.toString()); }},
    {"int", toInt},
    {"float", toFloat},
    {"abs", absFilter},
    {"upper", [](Evaluator&, const Value& v, Args&) { return sameKind(v, asciiUpper(v.toString())); }},
    {"lower", [](Evaluator&, const Value& v, Args&) { return sameKind(v, asciiLower(v.toString())); }},
    {"capitalize", [](Evaluator&, const Value& v, Args&) { return sameKind(v, pyCapitalize(v.toString())); }},
    {"title", [](Evaluator&, const Value& v, Args&) { return Value(pyTitle(v.toString())); }},
    {"replace", replace},
    {"round", roundFilter},
    {"safe", [](Evaluator&, const Value& v, Args&) { return v.isMarkup() ? v : Value::markup(v.toString()); }},
    {"escape", escape},
    {"e", escape},
    {"forceescape", [](Evaluator&, const Value& v, Args&) { return Value::markup(escapeHtml(v.toString())); }},
    {"format", format},
    {"center", center},
    {"truncate", truncate},
    {"slice", sliceFilter},
    {"filesizeformat", filesizeformat},
    {"urlencode", urlencode},
    {"xmlattr", xmlattr},
    {"items", items},
    {"dictsort", dictsort},
    {"sort", sort},
    {"unique", unique},
    {"min", [](Evaluator&, const Value& v, Args& a) { return extreme(v, a, false); }},
    {"max", [](Evaluator&, const Value& v, Args& a) { return extreme(v, a, true); }},
    {"sum", sum},
    {"batch", batch},
    {"indent", indent},
    {"wordcount", wordcount},
    {"reverse", reverse},
    {"attr", attr},
};

}  // namespace

FilterFn findFilter(std::string_view name) {
  for (const Entry& e : kFilters)
    if (name == e.name) return e.fn;
  return nullptr;
}

}  // namespace gizml::llm::tmpl
