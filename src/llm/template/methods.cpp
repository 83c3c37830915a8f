// Methods templates call on strings, lists and dicts: 'x'.startswith(...), d.items(), d.get(k), ...
// as transformers' ImmutableSandboxedEnvironment allows them: every method of str, the
// non-mutating ones of list and dict; the mutating ones (list.append, dict.update, ...) are
// "unsafe" and fail with jinja2's SecurityError message when called. Methods of a Markup string
// escape their string arguments and return Markup, as markupsafe's do.
#include <algorithm>
#include <memory>

#include "gizml/error.h"
#include "llm/template/builtins.h"
#include "llm/template/format.h"
#include "llm/template/text.h"

namespace gizml::llm::tmpl {
namespace {

using Method = Value (*)(Evaluator& ev, const Value& self, CallArgs& args);

const std::string* optionalStr(const CallArgs& args, std::size_t i, std::string_view name) {
  const Value* v = findArg(args, i, name);
  if (!v || v->isNone()) return nullptr;
  if (!v->isString()) throw Error("must be str or None, not " + v->typeName());
  return &v->str();
}

const std::string& requiredStr(const CallArgs& args, std::size_t i, std::string_view name) {
  const Value* v = findArg(args, i, name);
  if (!v) throw Error("missing required argument '" + std::string(name) + "'");
  if (!v->isString()) throw Error("must be str, not " + v->typeName());
  return v->str();
}

// Python's [start:end] on code points, as byte offsets into s.
std::pair<std::size_t, std::size_t> byteRange(const std::string& s, const CallArgs& args, std::size_t first) {
  const std::vector<std::size_t> offsets = codePointOffsets(s);
  const auto n = static_cast<int64_t>(offsets.size()) - 1;
  const auto bound = [&](std::size_t i, const char* name, int64_t fallback) {
    const Value* v = findArg(args, i, name);
    if (!v || v->isNone()) return fallback;
    if (!v->isInt() && !v->isBool()) throw Error("slice indices must be integers or None");
    int64_t x = v->asInt();
    if (x < 0) x = std::max<int64_t>(x + n, 0);
    return std::min(x, n);
  };
  const int64_t start = bound(first, "start", 0), end = bound(first + 1, "end", n);
  if (start > end) return {std::string::npos, 0};
  return {offsets[static_cast<std::size_t>(start)], offsets[static_cast<std::size_t>(end)]};
}

// find/rfind/index/rindex: the code point index of sub in s[start:end], or -1.
int64_t search(const Value& self, CallArgs& args, bool reverse) {
  const std::string& s = self.str();
  const std::string& sub = requiredStr(args, 0, "sub");
  const auto [begin, end] = byteRange(s, args, 1);
  if (begin == std::string::npos || end - begin < sub.size()) return -1;
  const std::string_view window = std::string_view(s).substr(begin, end - begin);
  const std::size_t at = reverse ? window.rfind(sub) : window.find(sub);
  if (at == std::string_view::npos) return -1;
  return static_cast<int64_t>(codePointCount(std::string_view(s).substr(0, begin + at)));
}

Value count(Evaluator&, const Value& self, CallArgs& args) {
  const std::string& sub = requiredStr(args, 0, "sub");
  const auto [begin, end] = byteRange(self.str(), args, 1);
  if (begin == std::string::npos) return int64_t{0};
  const std::string_view window = std::string_view(self.str()).substr(begin, end - begin);
  if (sub.empty()) return static_cast<int64_t>(codePointCount(window) + 1);
  int64_t n = 0;
  for (std::size_t at = window.find(sub); at != std::string_view::npos; at = window.find(sub, at + sub.size())) ++n;
  return n;
}

bool affix(const Value& self, CallArgs& args, bool prefix) {
  const Value* v = findArg(args, 0, "prefix");
  if (!v) throw Error("startswith/endswith need an argument");
  const auto [begin, end] = byteRange(self.str(), args, 1);
  if (begin == std::string::npos) return false;
  const std::string_view s = std::string_view(self.str()).substr(begin, end - begin);
  const auto matches = [&](const Value& a) {
    if (!a.isString()) throw Error("startswith/endswith first arg must be str or a tuple of str, not " + a.typeName());
    const std::string& x = a.str();
    return x.size() <= s.size() && (prefix ? s.compare(0, x.size(), x) : s.compare(s.size() - x.size(), x.size(), x)) == 0;
  };
  if (v->isList() && v->listData().tuple) return std::any_of(v->items().begin(), v->items().end(), matches);
  return matches(*v);
}

Value strings(std::vector<std::string> parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (std::string& p : parts) out.emplace_back(std::move(p));
  return Value::list(std::move(out));
}

Value split(Evaluator&, const Value& self, CallArgs& args, bool fromRight) {
  const std::string* sep = optionalStr(args, 0, "sep");
  if (sep && sep->empty()) throw Error("empty separator");
  const long maxsplit = static_cast<long>(intArg(args, 1, "maxsplit", -1));
  return strings(fromRight ? pyRsplit(self.str(), sep, maxsplit) : pySplit(self.str(), sep, maxsplit));
}

Value partition(const Value& self, CallArgs& args, bool fromRight) {
  const std::string& s = self.str();
  const std::string& sep = requiredStr(args, 0, "sep");
  if (sep.empty()) throw Error("empty separator");
  const std::size_t at = fromRight ? s.rfind(sep) : s.find(sep);
  if (at == std::string::npos)
    return fromRight ? Value::list({Value(""), Value(""), Value(s)}, true) : Value::list({Value(s), Value(""), Value("")}, true);
  return Value::list({Value(s.substr(0, at)), Value(sep), Value(s.substr(at + sep.size()))}, true);
}

Value join(Evaluator& ev, const Value& self, CallArgs& args) {
  std::string out;
  bool first = true;
  for (const Value& item : iterate(arg(args, 0, "iterable"))) {
    if (!item.isString()) throw Error("sequence item: expected str instance, " + item.typeName() + " found");
    if (!first) out += self.str();
    out += item.str();
    ev.checkSize(out.size());
    first = false;
  }
  return out;
}

Value replace(Evaluator& ev, const Value& self, CallArgs& args) {
  const std::string& from = requiredStr(args, 0, "old");
  const std::string& to = requiredStr(args, 1, "new");
  const std::string& s = self.str();
  const std::size_t hits = from.empty() ? codePointCount(s) + 1 : [&] {
    std::size_t n = 0;
    for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + from.size())) ++n;
    return n;
  }();
  if (to.size() > from.size() && hits > 0)  // bound the result before building it
    ev.checkSize(to.size() - from.size() > ev.limits().maxOutputBytes / hits ? SIZE_MAX
                                                                             : s.size() + hits * (to.size() - from.size()));
  return pyReplace(s, from, to, static_cast<long>(intArg(args, 2, "count", -1)));
}

std::size_t width(Evaluator& ev, const CallArgs& args) {
  const Value* v = findArg(args, 0, "width");
  if (!v) throw Error("missing required argument 'width'");
  if (!v->isInt() && !v->isBool()) throw Error("'" + v->typeName() + "' object cannot be interpreted as an integer");
  const int64_t w = std::max<int64_t>(v->asInt(), 0);
  ev.checkSize(static_cast<uint64_t>(w) > ev.limits().maxOutputBytes / 4 ? SIZE_MAX : static_cast<std::size_t>(w) * 4);
  return static_cast<std::size_t>(w);
}

Value pad(Evaluator& ev, const Value& self, CallArgs& args, char align) {
  const std::size_t w = width(ev, args);
  const Value fill = arg(args, 1, "fillchar", Value(" "));
  if (!fill.isString() || codePointCount(fill.str()) != 1)
    throw Error("The fill character must be exactly one character long");
  return pyPad(self.str(), w, fill.str(), align);
}

Value zfill(Evaluator& ev, const Value& self, CallArgs& args) {
  const std::size_t w = width(ev, args);
  const std::string& s = self.str();
  const std::size_t n = codePointCount(s);
  if (w <= n) return s;
  const std::size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
  return s.substr(0, sign) + std::string(w - n, '0') + s.substr(sign);
}

// str.isdigit() and friends on ASCII (other code points count as letters for isalpha/isalnum).
template <typename Pred>
bool allChars(const std::string& s, Pred pred) {
  if (s.empty()) return false;
  for (std::size_t pos = 0; pos < s.size();)
    if (!pred(decodeAt(s, pos))) return false;
  return true;
}
bool isDigit(char32_t c) { return c >= '0' && c <= '9'; }
bool isAlpha(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0xC0; }
bool isLowerChar(char32_t c) { return c >= 'a' && c <= 'z'; }
bool isUpperChar(char32_t c) { return c >= 'A' && c <= 'Z'; }

bool isTitle(const std::string& s) {
  bool cased = false, afterCased = false;
  for (const char c : s) {
    if (isUpperChar(c)) {
      if (afterCased) return false;
      afterCased = cased = true;
    } else if (isLowerChar(c)) {
      if (!afterCased) return false;
      cased = true;
    } else {
      afterCased = false;
    }
  }
  return cased;
}

Value removeAffix(const Value& self, CallArgs& args, bool prefix) {
  const std::string& s = self.str();
  const std::string& x = requiredStr(args, 0, prefix ? "prefix" : "suffix");
  if (x.size() > s.size()) return s;
  if (prefix) return s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s;
  return s.compare(s.size() - x.size(), x.size(), x) == 0 ? s.substr(0, s.size() - x.size()) : s;
}

// What markupsafe's Markup does with a method's arguments: most methods only wrap the result;
// replace/center/ljust/rjust escape their second argument, join and format all of them.
enum class OnMarkup { Plain, Wrap, EscapeSecond, EscapeAll };

struct Entry {
  const char* name;
  Method fn;
  OnMarkup markup = OnMarkup::Plain;
};

constexpr OnMarkup W = OnMarkup::Wrap, E2 = OnMarkup::EscapeSecond, EA = OnMarkup::EscapeAll;
// A method from one expression of `s` (the string, list or dict), the arguments `a` and `ev`.
#define METHOD_OF(expr) [](Evaluator & ev, const Value& s, CallArgs& a) -> Value { (void)ev, (void)a; return expr; }
const Entry kStringMethods[] = {
    {"startswith", METHOD_OF(affix(s, a, true))},
    {"endswith", METHOD_OF(affix(s, a, false))},
    {"split", METHOD_OF(split(ev, s, a, false)), W},
    {"rsplit", METHOD_OF(split(ev, s, a, true)), W},
    {"splitlines", METHOD_OF(strings(pySplitlines(s.str(), boolArg(a, 0, "keepends", false)))), W},
    {"partition", METHOD_OF(partition(s, a, false)), W},
    {"rpartition", METHOD_OF(partition(s, a, true)), W},
    {"strip", METHOD_OF(pyStrip(s.str(), optionalStr(a, 0, "chars"), true, true)), W},
    {"lstrip", METHOD_OF(pyStrip(s.str(), optionalStr(a, 0, "chars"), true, false)), W},
    {"rstrip", METHOD_OF(pyStrip(s.str(), optionalStr(a, 0, "chars"), false, true)), W},
    {"upper", METHOD_OF(asciiUpper(s.str())), W},
    {"lower", METHOD_OF(asciiLower(s.str())), W},
    {"casefold", METHOD_OF(asciiLower(s.str())), W},
    {"swapcase", METHOD_OF(pySwapcase(s.str())), W},
    {"title", METHOD_OF(pyStrTitle(s.str())), W},
    {"capitalize", METHOD_OF(pyCapitalize(s.str())), W},
    {"center", METHOD_OF(pad(ev, s, a, 'c')), E2},
    {"ljust", METHOD_OF(pad(ev, s, a, 'l')), E2},
    {"rjust", METHOD_OF(pad(ev, s, a, 'r')), E2},
    {"zfill", METHOD_OF(zfill(ev, s, a)), W},
    {"replace", replace, E2},
    {"removeprefix", METHOD_OF(removeAffix(s, a, true)), W},
    {"removesuffix", METHOD_OF(removeAffix(s, a, false)), W},
    {"join", join, EA},
    {"format", METHOD_OF(pyFormat(ev, s.str(), a)), EA},
    {"find", METHOD_OF(search(s, a, false))},
    {"rfind", METHOD_OF(search(s, a, true))},
    {"index",
     METHOD_OF([&] {
       const int64_t at = search(s, a, false);
       if (at < 0) throw Error("substring not found");
       return Value(at);
     }())},
    {"rindex",
     METHOD_OF([&] {
       const int64_t at = search(s, a, true);
       if (at < 0) throw Error("substring not found");
       return Value(at);
     }())},
    {"count", count},
    {"isdigit", METHOD_OF(allChars(s.str(), isDigit))},
    {"isdecimal", METHOD_OF(allChars(s.str(), isDigit))},
    {"isnumeric", METHOD_OF(allChars(s.str(), isDigit))},
    {"isalpha", METHOD_OF(allChars(s.str(), isAlpha))},
    {"isalnum", METHOD_OF(allChars(s.str(), [](char32_t c) { return isAlpha(c) || isDigit(c); }))},
    {"isspace", METHOD_OF(allChars(s.str(), isPyWhitespace))},
    {"isascii", METHOD_OF(s.str().empty() || allChars(s.str(), [](char32_t c) { return c < 0x80; }))},
    {"islower", METHOD_OF(pyIsLower(s.str()))},
    {"isupper", METHOD_OF(pyIsUpper(s.str()))},
    {"istitle", METHOD_OF(isTitle(s.str()))},
};

Value listIndex(Evaluator&, const Value& self, CallArgs& args) {
  const Value* x = findArg(args, 0, "value");
  if (!x) throw Error("index expected at least 1 argument, got 0");
  const auto& items = self.items();
  for (std::size_t i = 0; i < items.size(); ++i)
    if (equals(items[i], *x)) return static_cast<int64_t>(i);
  throw Error(x->repr() + " is not in list");
}

const Entry kListMethods[] = {
    {"index", listIndex},
    {"count",
     METHOD_OF(static_cast<int64_t>(std::count_if(s.items().begin(), s.items().end(),
                                                  [&](const Value& x) { return equals(x, arg(a, 0, "value")); })))},
    {"copy", METHOD_OF(Value::list(s.items(), s.listData().tuple))},
};

Value dictItems(Evaluator&, const Value& d, CallArgs&) {
  std::vector<Value> items;
  for (const auto& [k, v] : d.dict().items) items.push_back(Value::list({k, v}, true));
  return Value::view(std::move(items), "dict_items");
}

const Entry kDictMethods[] = {
    {"items", dictItems},
    {"keys", METHOD_OF(Value::view(iterate(s), "dict_keys"))},
    {"values",
     METHOD_OF([&] {
       std::vector<Value> values;
       for (const auto& kv : s.dict().items) values.push_back(kv.second);
       return Value::view(std::move(values), "dict_values");
     }())},
    {"get",
     METHOD_OF([&] {
       const Value key = arg(a, 0, "key");
       key.checkHashable();
       const Value* v = s.dict().find(key);
       return v ? *v : arg(a, 1, "default", Value(None{}));
     }())},
    {"copy", METHOD_OF(Value(DictData(s.dict())))},
};
#undef METHOD_OF

// What jinja2.sandbox's modifies_known_mutable refuses.
constexpr const char* kUnsafeListMethods[] = {"append", "clear", "pop", "reverse", "insert", "sort", "extend", "remove"};
constexpr const char* kUnsafeDictMethods[] = {"clear", "pop", "popitem", "setdefault", "update"};

// A method of a Markup string: arguments escaped as markupsafe does, string results (and the
// strings of list results) Markup.
Value callOnMarkup(Evaluator& ev, Method fn, OnMarkup how, const Value& self, CallArgs& args) {
  CallArgs escaped = args;
  const auto escapeArg = [](Value& v) {
    if (v.isString()) {
      v = Value::markup(escapedText(v));
    } else if (v.isList()) {
      std::vector<Value> items = v.items();
      for (Value& item : items)
        if (item.isString()) item = Value::markup(escapedText(item));
      v = Value::list(std::move(items), v.listData().tuple);
    }
  };
  if (how == OnMarkup::EscapeAll) {
    for (Value& v : escaped.args) escapeArg(v);
    for (auto& kv : escaped.kwargs) escapeArg(kv.second);
  } else if (how == OnMarkup::EscapeSecond && escaped.args.size() > 1) {
    escapeArg(escaped.args[1]);
  }
  Value result = fn(ev, self, escaped);
  const auto wrap = [](const Value& v) { return v.isString() ? Value::markup(v.str()) : v; };
  if (!result.isList()) return wrap(result);
  std::vector<Value> items;
  for (const Value& v : result.items()) items.push_back(wrap(v));
  return Value::list(std::move(items), result.listData().tuple);
}

}  // namespace

std::optional<Value> findMethod(const Value& obj, const std::string& name) {
  const auto bind = [&](const auto& table) -> std::optional<Value> {
    for (const Entry& e : table)
      if (name == e.name) {
        const Method fn = e.fn;
        const OnMarkup how = obj.isMarkup() ? e.markup : OnMarkup::Plain;
        return Value(std::make_shared<Callable>(Callable{name, [obj, fn, how](Evaluator& ev, CallArgs& args) {
          return how == OnMarkup::Plain ? fn(ev, obj, args) : callOnMarkup(ev, fn, how, obj, args);
        }}));
      }
    return std::nullopt;
  };
  const auto unsafe = [&](const auto& names) -> std::optional<Value> {
    for (const char* n : names)
      if (name == n)
        return Value::undefined("access to attribute '" + name + "' of '" + obj.typeName() + "' object is unsafe.");
    return std::nullopt;
  };
  if (obj.isString()) return bind(kStringMethods);
  if (obj.isList() && !obj.listData().tuple) {
    if (auto m = unsafe(kUnsafeListMethods)) return m;
    return bind(kListMethods);
  }
  if (obj.isList()) return name == "copy" ? std::nullopt : bind(kListMethods);  // tuples: index, count
  if (obj.isDict()) {
    if (auto m = unsafe(kUnsafeDictMethods)) return m;
    return bind(kDictMethods);
  }
  return std::nullopt;
}

}  // namespace gizml::llm::tmpl
