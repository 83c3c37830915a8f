// Jinja's tests (`x is defined`, `n is divisibleby 3`, ...), with Python's type rules: bool is a
// number but not an integer, dicts and strings are sequences, undefined is iterable.
#include <cmath>
#include <string_view>

#include "gizml/error.h"
#include "llm/template/builtins.h"
#include "llm/template/text.h"

namespace gizml::llm::tmpl {
namespace {

Value other(const CallArgs& args) {
  const Value* v = findArg(args, 0, "other");
  if (!v) throw Error("this test needs an argument");
  return *v;
}

bool compareTest(const Value& v, CallArgs& a, bool (*pred)(int)) { return pred(compare(v, other(a))); }

struct Entry {
  const char* name;
  TestFn fn;
};

const Entry kTests[] = {
    {"defined", [](Evaluator&, const Value& v, CallArgs&) { return !v.isUndefined(); }},
    {"undefined", [](Evaluator&, const Value& v, CallArgs&) { return v.isUndefined(); }},
    {"none", [](Evaluator&, const Value& v, CallArgs&) { return v.isNone(); }},
    {"boolean", [](Evaluator&, const Value& v, CallArgs&) { return v.isBool(); }},
    {"true", [](Evaluator&, const Value& v, CallArgs&) { return v.isBool() && v.asBool(); }},
    {"false", [](Evaluator&, const Value& v, CallArgs&) { return v.isBool() && !v.asBool(); }},
    {"number", [](Evaluator&, const Value& v, CallArgs&) { return v.isNumber(); }},
    {"integer", [](Evaluator&, const Value& v, CallArgs&) { return v.isInt(); }},
    {"float", [](Evaluator&, const Value& v, CallArgs&) { return v.isFloat(); }},
    {"string", [](Evaluator&, const Value& v, CallArgs&) { return v.isString(); }},
    {"mapping", [](Evaluator&, const Value& v, CallArgs&) { return v.isDict(); }},
    {"iterable",
     [](Evaluator&, const Value& v, CallArgs&) { return v.isList() || v.isDict() || v.isString() || v.isUndefined(); }},
    {"sequence",
     [](Evaluator&, const Value& v, CallArgs&) { return v.isList() || v.isDict() || v.isString() || v.isUndefined(); }},
    {"callable", [](Evaluator&, const Value& v, CallArgs&) { return v.isCallable() || v.isUndefined(); }},
    {"escaped", [](Evaluator&, const Value& v, CallArgs&) { return v.isMarkup(); }},
    {"even",
     [](Evaluator&, const Value& v, CallArgs&) {
       if (!v.isNumber()) throw Error("'even' needs a number");
       return v.isFloat() ? std::fmod(v.asDouble(), 2.0) == 0 : v.asInt() % 2 == 0;
     }},
    {"odd",
     [](Evaluator&, const Value& v, CallArgs&) {
       if (!v.isNumber()) throw Error("'odd' needs a number");
       return v.isFloat() ? std::fabs(std::fmod(v.asDouble(), 2.0)) == 1 : v.asInt() % 2 != 0;
     }},
    {"divisibleby",
     [](Evaluator&, const Value& v, CallArgs& a) {
       const Value d = other(a);
       if (!v.isNumber() || !d.isNumber()) throw Error("'divisibleby' needs numbers");
       if (d.isFloat() || v.isFloat()) {
         if (d.asDouble() == 0) throw Error("division by zero");
         return std::fmod(v.asDouble(), d.asDouble()) == 0;
       }
       if (d.asInt() == 0) throw Error("division by zero");
       return d.asInt() == -1 || v.asInt() % d.asInt() == 0;
     }},
    {"in", [](Evaluator&, const Value& v, CallArgs& a) { return contains(other(a), v); }},
    {"eq", [](Evaluator&, const Value& v, CallArgs& a) { return equals(v, other(a)); }},
    {"equalto", [](Evaluator&, const Value& v, CallArgs& a) { return equals(v, other(a)); }},
    {"==", [](Evaluator&, const Value& v, CallArgs& a) { return equals(v, other(a)); }},
    {"ne", [](Evaluator&, const Value& v, CallArgs& a) { return !equals(v, other(a)); }},
    {"!=", [](Evaluator&, const Value& v, CallArgs& a) { return !equals(v, other(a)); }},
    {"lt", [](Evaluator&, const Value& v, CallArgs& a) { return compareTest(v, a, [](int c) { return c < 0; }); }},
    {"lessthan", [](Evaluator&, const Value& v, CallArgs& a) { return compareTest(v, a, [](int c) { return c < 0; }); }},
    {"<", [](Evaluator&, const Value& v, CallArgs& a) { return compareTest(v, a, [](int c) { return c < 0; }); }},
    {"le", [](Evaluator&, const Value& v, CallArgs& a) { return compareTest(v, a, [](int c) { return c <= 0; }); }},
    {"<=", [](Evaluator&, const Value& v, CallArgs& a) { return compareTest(v, a, [](int c) { return c <= 0; }); }},
    {"gt", [](Evaluator&, const Value& v, CallArgs& a) { return compareTest(v, a, [](int c) { return c > 0; }); }},
    {"greaterthan", [](Evaluator&, const Value& v, CallArgs& a) { return compareTest(v, a, [](int c) { return c > 0; }); }},
    {">", [](Evaluator&, const Value& v, CallArgs& a) { return compareTest(v, a, [](int c) { return c > 0; }); }},
    {"ge", [](Evaluator&, const Value& v, CallArgs& a) { return compareTest(v, a, [](int c) { return c >= 0; }); }},
    {">=", [](Evaluator&, const Value& v, CallArgs& a) { return compareTest(v, a, [](int c) { return c >= 0; }); }},
    {"sameas",
     [](Evaluator&, const Value& v, CallArgs& a) {
       const Value o = other(a);
       // Python's `is`: singletons and small ints compare by value, containers by identity.
       if (v.isNone() || v.isBool() || v.isUndefined()) return equals(v, o) && v.typeName() == o.typeName();
       return v.typeName() == o.typeName() && (v.isInt() ? v.asInt() == o.asInt() : false);
     }},
    {"lower", [](Evaluator&, const Value& v, CallArgs&) { return pyIsLower(v.toString()); }},  // str(v).islower()
    {"upper", [](Evaluator&, const Value& v, CallArgs&) { return pyIsUpper(v.toString()); }},
    {"filter",
     [](Evaluator&, const Value& v, CallArgs&) {
       v.checkHashable();  // a lookup in jinja2's dict of filters
       return v.isString() && findFilter(v.str()) != nullptr;
     }},
    {"test",
     [](Evaluator&, const Value& v, CallArgs&) {
       v.checkHashable();
       return v.isString() && findTest(v.str()) != nullptr;
     }},
};

}  // namespace

TestFn findTest(std::string_view name) {
  for (const Entry& e : kTests)
    if (name == e.name) return e.fn;
  return nullptr;
}

}  // namespace gizml::llm::tmpl
