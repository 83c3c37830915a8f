#pragma once
// Values of the template language, with Python's semantics where templates can observe them:
// str()/repr() formatting, truthiness, == across int/float/bool, insertion-ordered dicts.
// Strings, lists and dicts are immutable and shared; only namespace() objects change.
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

struct ListData {
  std::vector<Value> items;
  bool tuple = false;  // printed as (a, b) like Python tuples
  int depth = 1;       // nesting, bounded so that printing and comparing cannot overflow the stack
};

struct DictData {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value value);
  int depth = 1;
};

/// The deepest list/dict nesting a value may have.
constexpr int kMaxNesting = 256;

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

struct Callable {
  std::string name;
  std::function<Value(CallArgs&)> call;
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
  Value(std::string s) : data_(std::make_shared<const std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(ListData list);  // throw when nested deeper than kMaxNesting
  Value(DictData dict);
  Value(std::shared_ptr<Callable> c) : data_(std::move(c)) {}
  Value(std::shared_ptr<Namespace> ns) : data_(std::move(ns)) {}

  static Value undefined(std::string message) { Value v; v.data_ = Undefined{std::move(message)}; return v; }
  static Value list(std::vector<Value> items, bool tuple = false) { return Value(ListData{std::move(items), tuple}); }
  static Value fromJson(const nlohmann::ordered_json& json);

  bool isUndefined() const { return std::holds_alternative<Undefined>(data_); }
  bool isNone() const { return std::holds_alternative<None>(data_); }
  bool isBool() const { return std::holds_alternative<bool>(data_); }
  bool isInt() const { return std::holds_alternative<int64_t>(data_); }
  bool isFloat() const { return std::holds_alternative<double>(data_); }
  bool isNumber() const { return isInt() || isFloat() || isBool(); }  // Python: bool is an int
  bool isString() const { return std::holds_alternative<StringPtr>(data_); }
  bool isList() const { return std::holds_alternative<ListPtr>(data_); }
  bool isDict() const { return std::holds_alternative<DictPtr>(data_); }
  bool isCallable() const { return std::holds_alternative<std::shared_ptr<Callable>>(data_); }
  bool isNamespace() const { return std::holds_alternative<std::shared_ptr<Namespace>>(data_); }

  bool asBool() const { return std::get<bool>(data_); }
  int64_t asInt() const { return isBool() ? int64_t{asBool()} : std::get<int64_t>(data_); }  // int or bool
  double asDouble() const { return isFloat() ? std::get<double>(data_) : static_cast<double>(asInt()); }
  const std::string& str() const { return *std::get<StringPtr>(data_); }
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

 private:
  using StringPtr = std::shared_ptr<const std::string>;
  using ListPtr = std::shared_ptr<const ListData>;
  using DictPtr = std::shared_ptr<const DictData>;
  std::variant<Undefined, None, bool, int64_t, double, StringPtr, ListPtr, DictPtr, std::shared_ptr<Callable>,
               std::shared_ptr<Namespace>>
      data_;
};

/// Python's ==, with Jinja's undefined == undefined.
bool equals(const Value& a, const Value& b);
/// Python's <, <=, ... for numbers, strings and lists: the sign of a - b; throws on other types.
int compare(const Value& a, const Value& b);

/// Python's repr(float): shortest round trip, "1.0", "1e-05", "1e+16", "inf", "nan".
std::string formatFloat(double d);

}  // namespace gizml::llm::tmpl
