// Python's operators, attribute and item access, slicing, `in` and iteration on template values.
#include <cmath>
#include <cstdint>

#include "gizml/error.h"
#include "llm/template/builtins.h"
#include "llm/template/format.h"
#include "llm/template/text.h"

namespace gizml::llm::tmpl {

void undefinedError(const Value& v) {
  throw Error(v.undefinedMessage().empty() ? "value is undefined" : v.undefinedMessage());
}

namespace {

[[noreturn]] void typeError(const std::string& op, const Value& a, const Value& b) {
  throw Error("unsupported operand type(s) for " + op + ": '" + a.typeName() + "' and '" + b.typeName() + "'");
}

// Python ints do not overflow; ours are 64-bit, so overflow is an error rather than a wrap.
template <typename Op>
int64_t checked(Op op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op(x, y, &r)) throw Error("integer overflow");
  return r;
}
constexpr auto kAdd = [](int64_t x, int64_t y, int64_t* r) { return __builtin_add_overflow(x, y, r); };
constexpr auto kSub = [](int64_t x, int64_t y, int64_t* r) { return __builtin_sub_overflow(x, y, r); };
constexpr auto kMul = [](int64_t x, int64_t y, int64_t* r) { return __builtin_mul_overflow(x, y, r); };

Value repeat(Evaluator& ev, const Value& seq, int64_t n) {
  if (n <= 0 || (seq.isString() ? seq.str().empty() : seq.items().empty()))
    return seq.isMarkup() ? Value::markup("") : seq.isString() ? Value("") : Value::list({}, seq.listData().tuple);
  if (seq.isString()) {
    const std::size_t len = seq.str().size(), max = ev.limits().maxOutputBytes;
    ev.checkSize(len > 0 && static_cast<uint64_t>(n) > max / len ? SIZE_MAX : len * static_cast<std::size_t>(n));
    std::string out;
    out.reserve(seq.str().size() * static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return seq.isMarkup() ? Value::markup(std::move(out)) : Value(std::move(out));
  }
  const auto& items = seq.items();
  const std::size_t len = items.size(), max = ev.limits().maxItems;
  ev.checkItems(len > 0 && static_cast<uint64_t>(n) > max / len ? SIZE_MAX : len * static_cast<std::size_t>(n));
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.listData().tuple);
}

Value arithmetic(Evaluator& ev, const std::string& op, const Value& a, const Value& b) {
  if (a.isNumber() && b.isNumber()) {
    const bool ints = !a.isFloat() && !b.isFloat();
    if ((op == "/" || op == "//" || op == "%") && (ints ? b.asInt() == 0 : b.asDouble() == 0.0))
      throw Error("division by zero");
    if (ints) {
      const int64_t x = a.asInt(), y = b.asInt();
      if (op == "+") return checked(kAdd, x, y);
      if (op == "-") return checked(kSub, x, y);
      if (op == "*") return checked(kMul, x, y);
      if (op == "/") return static_cast<double>(x) / static_cast<double>(y);
      if (op == "//" || op == "%") {
        if (x == INT64_MIN && y == -1) throw Error("integer overflow");
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;  // Python floors
        return op == "//" ? q : m;
      }
      if (op == "**") {
        if (y < 0) return std::pow(static_cast<double>(x), static_cast<double>(y));
        int64_t result = 1, base = x;
        for (int64_t e = y; e > 0; e >>= 1) {
          if (e & 1) result = checked(kMul, result, base);
          if (e > 1) base = checked(kMul, base, base);
        }
        return result;
      }
    } else {
      const double x = a.asDouble(), y = b.asDouble();
      if (op == "+") return x + y;
      if (op == "-") return x - y;
      if (op == "*") return x * y;
      if (op == "/") return x / y;
      if (op == "//") return std::floor(x / y);
      if (op == "%") {
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return m;
      }
      if (op == "**") return std::pow(x, y);
    }
  }
  if (op == "+" && a.isString() && b.isString()) {
    ev.checkSize(a.str().size() + b.str().size());
    // Markup + str escapes the str (either side), as markupsafe's __add__/__radd__ do.
    if (a.isMarkup() || b.isMarkup()) {
      std::string out = escapedText(a) + escapedText(b);
      ev.checkSize(out.size());
      return Value::markup(std::move(out));
    }
    return a.str() + b.str();
  }
  if (op == "+" && a.isList() && b.isList() && a.listData().tuple == b.listData().tuple) {
    ev.checkItems(a.items().size() + b.items().size());
    std::vector<Value> items = a.items();
    items.insert(items.end(), b.items().begin(), b.items().end());
    return Value::list(std::move(items), a.listData().tuple);
  }
  if (op == "*" && (a.isString() || a.isList()) && (b.isInt() || b.isBool())) return repeat(ev, a, b.asInt());
  if (op == "*" && (b.isString() || b.isList()) && (a.isInt() || a.isBool())) return repeat(ev, b, a.asInt());
  if (op == "%" && a.isString()) {
    // Markup % values escapes the values, as markupsafe does.
    if (!a.isMarkup()) return pyPercent(ev, a.str(), b);
    const auto escape = [](const Value& v) { return v.isString() ? Value::markup(escapedText(v)) : v; };
    Value escaped = escape(b);
    if (b.isList() && b.listData().tuple) {
      std::vector<Value> items;
      for (const Value& v : b.items()) items.push_back(escape(v));
      escaped = Value::list(std::move(items), true);
    }
    return Value::markup(pyPercent(ev, a.str(), escaped));
  }
  typeError(op, a, b);
}

// Python's slice index normalisation (PySlice_AdjustIndices).
int64_t sliceBound(const Value& v, int64_t n, int64_t step, bool isStart) {
  if (v.isNone() || v.isUndefined()) return isStart ? (step < 0 ? n - 1 : 0) : (step < 0 ? -1 : n);
  int64_t i = v.asInt();
  if (i < 0) {
    i += n;
    if (i < 0) i = step < 0 ? -1 : 0;
  } else if (i >= n) {
    i = step < 0 ? n - 1 : n;
  }
  return i;
}

}  // namespace

Value binaryOp(Evaluator& ev, const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    const std::string x = a.toString(), y = b.toString();
    ev.checkSize(x.size() + y.size());
    return x + y;
  }
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "in") return contains(b, a);
  if (op == "not in") return !contains(b, a);
  if (op == "%" && a.isString()) return arithmetic(ev, op, a, b);  // undefined is a mapping to str.__mod__
  if (a.isUndefined()) undefinedError(a);
  if (b.isUndefined()) undefinedError(b);
  if (op == "<") return compare(a, b) < 0;
  if (op == "<=") return compare(a, b) <= 0;
  if (op == ">") return compare(a, b) > 0;
  if (op == ">=") return compare(a, b) >= 0;
  return arithmetic(ev, op, a, b);
}

bool contains(const Value& container, const Value& item) {
  if (container.isString()) {
    if (!item.isString()) throw Error("'in <string>' requires string as left operand, not " + item.typeName());
    return container.str().find(item.str()) != std::string::npos;
  }
  if (container.isList()) {
    for (const Value& v : container.items())
      if (equals(v, item)) return true;
    return false;
  }
  if (container.isDict()) {
    item.checkHashable();
    return container.dict().find(item) != nullptr;
  }
  if (container.isUndefined()) return false;  // Jinja's Undefined iterates as empty
  throw Error("argument of type '" + container.typeName() + "' is not iterable");
}

static Value noAttribute(const Value& obj, const std::string& name) {
  // std::string first: GCC 12 warns falsely (-Wrestrict) on "literal" + temporary.
  return Value::undefined(std::string("'") + obj.typeName() + " object' has no attribute '" + name + "'");
}

Value getAttr(const Value& obj, const std::string& name) {
  if (obj.isUndefined()) undefinedError(obj);
  if (obj.isNamespace()) {
    const Value* v = obj.ns()->attrs.find(name);
    return v ? *v : noAttribute(obj, name);
  }
  // Python attributes (methods) first, then items: Jinja's getattr order.
  if (std::optional<Value> method = findMethod(obj, name)) return *method;
  if (obj.isDict()) {
    const Value* v = obj.dict().find(name);
    if (v) return *v;
  }
  return noAttribute(obj, name);
}

Value getItem(const Value& obj, const Value& key) {
  if (obj.isUndefined()) undefinedError(obj);
  if (obj.isDict() && !(key.isList() && !key.listData().tuple) && !key.isDict()) {  // unhashable keys find nothing
    const Value* v = obj.dict().find(key);
    if (v) return *v;
  }
  if (obj.isList() && obj.listData().view)
    return Value::undefined(std::string("'") + obj.typeName() + "' object is not subscriptable");
  if ((obj.isList() || obj.isString()) && (key.isInt() || key.isBool())) {
    int64_t i = key.asInt();
    if (obj.isList()) {
      const int64_t n = static_cast<int64_t>(obj.items().size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return obj.items()[static_cast<std::size_t>(i)];
    } else {
      const std::vector<std::size_t> offsets = codePointOffsets(obj.str());
      const int64_t n = static_cast<int64_t>(offsets.size()) - 1;
      if (i < 0) i += n;
      if (i >= 0 && i < n) {
        std::string c = obj.str().substr(offsets[static_cast<std::size_t>(i)],
                                         offsets[static_cast<std::size_t>(i) + 1] - offsets[static_cast<std::size_t>(i)]);
        return obj.isMarkup() ? Value::markup(std::move(c)) : Value(std::move(c));
      }
    }
    return Value::undefined(obj.typeName() + " index out of range");
  }
  // obj[key] failed: Jinja falls back to the attribute of that name.
  if (key.isString()) return getAttr(obj, key.str());
  return Value::undefined(std::string("'") + obj.typeName() + " object' has no element " + key.repr());
}

Value sliceOf(const Value& obj, const Value& startV, const Value& stopV, const Value& stepV) {
  if (obj.isUndefined()) undefinedError(obj);
  for (const Value* bound : {&startV, &stopV, &stepV})
    if (!bound->isUndefined() && !bound->isNone() && !bound->isInt() && !bound->isBool())
      throw Error("slice indices must be integers or None");
  const int64_t step = stepV.isUndefined() || stepV.isNone() ? 1 : stepV.asInt();
  if (step == 0) throw Error("slice step cannot be zero");
  // jinja2 slices with Python's own [a:b], so anything but a sequence fails outright.
  if (obj.isDict()) throw Error("unhashable type: 'slice'");
  const bool sequence = obj.isString() || (obj.isList() && !obj.listData().view);
  if (!sequence) throw Error(std::string("'") + obj.typeName() + "' object is not subscriptable");
  std::vector<std::size_t> offsets;
  int64_t n = 0;
  if (obj.isString()) {
    offsets = codePointOffsets(obj.str());
    n = static_cast<int64_t>(offsets.size()) - 1;
  } else {
    n = static_cast<int64_t>(obj.items().size());
  }
  const int64_t start = sliceBound(startV, n, step, true), stop = sliceBound(stopV, n, step, false);
  std::string s;
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    const auto k = static_cast<std::size_t>(i);
    if (obj.isString()) s.append(obj.str(), offsets[k], offsets[k + 1] - offsets[k]);
    else items.push_back(obj.items()[k]);
    if (step > 0 ? i > INT64_MAX - step : i < INT64_MIN - step) break;
  }
  if (obj.isString()) return obj.isMarkup() ? Value::markup(std::move(s)) : Value(std::move(s));
  return Value::list(std::move(items), obj.listData().tuple);
}

std::vector<Value> iterate(const Value& v) {
  if (v.isList()) return v.items();
  if (v.isUndefined()) return {};
  std::vector<Value> out;
  if (v.isDict()) {
    for (const auto& kv : v.dict().items) out.emplace_back(kv.first);
  } else if (v.isString()) {
    const std::vector<std::size_t> offsets = codePointOffsets(v.str());
    for (std::size_t i = 0; i + 1 < offsets.size(); ++i)
      out.emplace_back(v.str().substr(offsets[i], offsets[i + 1] - offsets[i]));
  } else {
    throw Error("'" + v.typeName() + "' object is not iterable");
  }
  return out;
}

Value getAttrPath(const Value& obj, const std::string& path) {
  Value v = obj;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && part.size() < 18 && part.find_first_not_of("0123456789") == std::string::npos;
    v = getItem(v, digits ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

}  // namespace gizml::llm::tmpl
