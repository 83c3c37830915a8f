// Methods templates call on strings and dicts: 'x'.startswith(...), d.items(), d.get(k), ...
// Mutating methods (list.append, dict.update) are absent, as in transformers' immutable sandbox.
#include <memory>

#include "gizml/error.h"
#include "llm/template/builtins.h"
#include "llm/template/text.h"

namespace gizml::llm::tmpl {
namespace {

using Method = Value (*)(const Value& self, CallArgs& args);

const std::string* optionalStr(const CallArgs& args, std::size_t i, std::string_view name) {
  const Value* v = findArg(args, i, name);
  if (!v || v->isNone()) return nullptr;
  if (!v->isString()) throw Error("expected a string argument, got " + v->typeName());
  return &v->str();
}

bool affix(const Value& self, CallArgs& args, bool prefix) {
  const Value* v = findArg(args, 0, "prefix");
  if (!v) throw Error("startswith/endswith need an argument");
  const std::string& s = self.str();
  const auto matches = [&](const Value& a) {
    if (!a.isString()) throw Error("startswith/endswith take a string or a tuple of strings");
    const std::string& x = a.str();
    return x.size() <= s.size() && (prefix ? s.compare(0, x.size(), x) : s.compare(s.size() - x.size(), x.size(), x)) == 0;
  };
  if (v->isList()) {
    for (const Value& a : v->items())
      if (matches(a)) return true;
    return false;
  }
  return matches(*v);
}

Value split(const Value& self, CallArgs& args) {
  const std::string* sep = optionalStr(args, 0, "sep");
  if (sep && sep->empty()) throw Error("empty separator");
  std::vector<Value> parts;
  for (std::string& p : pySplit(self.str(), sep, static_cast<long>(intArg(args, 1, "maxsplit", -1))))
    parts.emplace_back(std::move(p));
  return Value::list(std::move(parts));
}

Value find(const Value& self, CallArgs& args) {
  const std::string needle = strArg(args, 0, "sub", "");
  const std::size_t at = self.str().find(needle);
  if (at == std::string::npos) return int64_t{-1};
  return static_cast<int64_t>(codePointCount(std::string_view(self.str()).substr(0, at)));
}

Value join(const Value& self, CallArgs& args) {
  std::string out;
  bool first = true;
  for (const Value& item : iterate(arg(args, 0, "iterable"))) {
    if (!item.isString()) throw Error("sequence item: expected str instance, " + item.typeName() + " found");
    if (!first) out += self.str();
    out += item.str();
    first = false;
  }
  return out;
}

struct Entry {
  const char* name;
  Method fn;
};

const Entry kStringMethods[] = {
    {"startswith", [](const Value& s, CallArgs& a) { return Value(affix(s, a, true)); }},
    {"endswith", [](const Value& s, CallArgs& a) { return Value(affix(s, a, false)); }},
    {"split", split},
    {"strip", [](const Value& s, CallArgs& a) { return Value(pyStrip(s.str(), optionalStr(a, 0, "chars"), true, true)); }},
    {"lstrip", [](const Value& s, CallArgs& a) { return Value(pyStrip(s.str(), optionalStr(a, 0, "chars"), true, false)); }},
    {"rstrip", [](const Value& s, CallArgs& a) { return Value(pyStrip(s.str(), optionalStr(a, 0, "chars"), false, true)); }},
    {"upper", [](const Value& s, CallArgs&) { return Value(asciiUpper(s.str())); }},
    {"lower", [](const Value& s, CallArgs&) { return Value(asciiLower(s.str())); }},
    {"title", [](const Value& s, CallArgs&) { return Value(pyTitle(s.str())); }},
    {"capitalize", [](const Value& s, CallArgs&) { return Value(pyCapitalize(s.str())); }},
    {"find", find},
    {"join", join},
};

Value dictItems(const Value& d, CallArgs&) {
  std::vector<Value> items;
  for (const auto& [k, v] : d.dict().items) items.push_back(Value::list({Value(k), v}, true));
  return Value::list(std::move(items));
}

const Entry kDictMethods[] = {
    {"items", dictItems},
    {"keys", [](const Value& d, CallArgs&) { return Value::list(iterate(d)); }},
    {"values",
     [](const Value& d, CallArgs&) {
       std::vector<Value> values;
       for (const auto& kv : d.dict().items) values.push_back(kv.second);
       return Value::list(std::move(values));
     }},
    {"get",
     [](const Value& d, CallArgs& a) {
       const Value key = arg(a, 0, "key");
       const Value* v = key.isString() ? d.dict().find(key.str()) : nullptr;
       return v ? *v : arg(a, 1, "default", Value(None{}));
     }},
};

}  // namespace

Value findMethod(const Value& obj, const std::string& name) {
  const auto bind = [&](const auto& table) -> Value {
    for (const Entry& e : table)
      if (name == e.name) {
        const Method fn = e.fn;
        return std::make_shared<Callable>(Callable{name, [obj, fn](CallArgs& args) { return fn(obj, args); }});
      }
    return Value();
  };
  if (obj.isString()) return bind(kStringMethods);
  if (obj.isDict()) return bind(kDictMethods);
  return Value();
}

}  // namespace gizml::llm::tmpl
