#pragma once
// Values of the template language, with Python's semantics where templates can observe them:
// str()/repr() formatting, truthiness, == across int/float/bool, insertion-ordered dicts.
// Strings, lists and dicts are immutable and shared; only namespace() objects change. Dict keys
// are any hashable value (1, 1.0 and True are one key, as in Python); strings may be Markup
// (made by |safe and |escape), which escapes what is concatenated to it, as markupsafe does.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace gizml::llm::tmpl {

class Value;
class Evaluator;

struct ListData {
  std::vector<Value> items;
  bool tuple = false;  // printed as (a, b) like Python tuples
  const char* view = nullptr;  // "dict_keys", ...: d.keys() and friends print and index as Python's views
  int depth = 1;       // nesting, bounded so that printing and comparing cannot overflow the stack
};

struct DictData {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  const Value* find(const std::string& key) const { return find(std::string_view(key)); }
  const Value* find(const char* key) const { return find(std::string_view(key)); }
  /// Python's d[key] = value: an equal key keeps its place (and its first spelling).
  void set(Value key, Value value);
  int depth = 1;
};

struct StringData {
  std::string text;
  bool markup = false;
};

/// The deepest list/dict nesting a value may have.
constexpr int kMaxNesting = 256;

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

struct Callable {
  std::string name;
  std::function<Value(Evaluator&, CallArgs&)> call;
};

struct Namespace {
  DictData attrs;
};

struct Undefined {
  std::string message;  // the error that using it raises, e.g. "'x' is undefined"
};

struct None {};

class Value {
 public:
  Value() : data_(Undefined{}) {}
  Value(None) : data_(None{}) {}
  Value(bool b) : data_(b) {}
  Value(int64_t i) : data_(i) {}
  Value(int i) : data_(int64_t{i}) {}
  Value(double d) : data_(d) {}
  Value(std::string s) : data_(std::make_shared<const StringData>(StringData{std::move(s)})) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(ListData list);  // throw when nested deeper than kMaxNesting
  Value(DictData dict);
  Value(std::shared_ptr<Callable> c) : data_(std::move(c)) {}
  Value(std::shared_ptr<Namespace> ns) : data_(std::move(ns)) {}

  static Value undefined(std::string message) { Value v; v.data_ = Undefined{std::move(message)}; return v; }
  static Value list(std::vector<Value> items, bool tuple = false) { return Value(ListData{std::move(items), tuple}); }
  static Value view(std::vector<Value> items, const char* name) { return Value(ListData{std::move(items), false, name}); }
  static Value markup(std::string s) {
    Value v;
    v.data_ = std::make_shared<const StringData>(StringData{std::move(s), true});
    return v;
  }
  /// Throws gizml::Error when the JSON nests deeper than kMaxNesting (checked before recursing).
  static Value fromJson(const nlohmann::ordered_json& json, int depth = 0);

  bool isUndefined() const { return std::holds_alternative<Undefined>(data_); }
  bool isNone() const { return std::holds_alternative<None>(data_); }
  bool isBool() const { return std::holds_alternative<bool>(data_); }
  bool isInt() const { return std::holds_alternative<int64_t>(data_); }
  bool isFloat() const { return std::holds_alternative<double>(data_); }
  bool isNumber() const { return isInt() || isFloat() || isBool(); }  // Python: bool is an int
  bool isString() const { return std::holds_alternative<StringPtr>(data_); }
  bool isList() const { return std::holds_alternative<ListPtr>(data_); }
  bool isDict() const { return std::holds_alternative<DictPtr>(data_); }
  bool isMarkup() const { return isString() && std::get<StringPtr>(data_)->markup; }
  bool isCallable() const { return std::holds_alternative<std::shared_ptr<Callable>>(data_); }
  bool isNamespace() const { return std::holds_alternative<std::shared_ptr<Namespace>>(data_); }

  bool asBool() const { return std::get<bool>(data_); }
  int64_t asInt() const { return isBool() ? int64_t{asBool()} : std::get<int64_t>(data_); }  // int or bool
  double asDouble() const { return isFloat() ? std::get<double>(data_) : static_cast<double>(asInt()); }
  const std::string& str() const { return std::get<StringPtr>(data_)->text; }
  const ListData& listData() const { return *std::get<ListPtr>(data_); }
  const std::vector<Value>& items() const { return listData().items; }
  const DictData& dict() const { return *std::get<DictPtr>(data_); }
  Callable& callable() const { return *std::get<std::shared_ptr<Callable>>(data_); }
  const std::shared_ptr<Namespace>& ns() const { return std::get<std::shared_ptr<Namespace>>(data_); }
  const std::string& undefinedMessage() const { return std::get<Undefined>(data_).message; }
  /// Nesting depth: 0 for scalars (and namespaces, which are opaque here).
  int depth() const { return isList() ? listData().depth : isDict() ? dict().depth : 0; }

  /// Python's bool(): empty strings/lists/dicts, 0, None and undefined are false.
  bool truthy() const;
  /// Python's str(); undefined prints as "".
  std::string toString() const;
  /// Python's repr(), as str() of containers shows their items.
  std::string repr() const;
  /// Python's type name, for error messages.
  std::string typeName() const;
  /// Throws Python's "unhashable type" unless the value can be a dict key.
  void checkHashable() const;

 private:
  using StringPtr = std::shared_ptr<const StringData>;
  using ListPtr = std::shared_ptr<const ListData>;
  using DictPtr = std::shared_ptr<const DictData>;
  std::variant<Undefined, None, bool, int64_t, double, StringPtr, ListPtr, DictPtr, std::shared_ptr<Callable>,
               std::shared_ptr<Namespace>>
      data_;
};

/// Python's ==, with Jinja's undefined == undefined.
bool equals(const Value& a, const Value& b);
/// markupsafe's escape(): & < > " ' as entities; Markup passes through.
std::string escapeHtml(const std::string& s);
/// A string operand as Markup would take it: escaped unless it is Markup already.
std::string escapedText(const Value& v);
/// Python's <, <=, ... for numbers, strings and lists: the sign of a - b; throws on other types.
int compare(const Value& a, const Value& b);

/// Python's repr(float): shortest round trip, "1.0", "1e-05", "1e+16", "inf", "nan".
std::string formatFloat(double d);

}  // namespace gizml::llm::tmpl
