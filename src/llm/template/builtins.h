#pragma once
// The library the templates call into: operators and attribute access (operators.cpp), filters
// (filters.cpp), tests (tests.cpp), methods of strings and dicts (methods.cpp) and global
// functions (globals.cpp).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "llm/template/evaluator.h"
#include "llm/template/value.h"

namespace gizml::llm::tmpl {

using FilterFn = Value (*)(Evaluator&, const Value& input, CallArgs& args);
using TestFn = bool (*)(Evaluator&, const Value& input, CallArgs& args);

FilterFn findFilter(std::string_view name);
TestFn findTest(std::string_view name);
/// The bound method obj.name (str.split, dict.items, ...); an undefined that fails when called for
/// the methods the sandbox refuses (list.append, ...); nullopt when Python has no such attribute.
std::optional<Value> findMethod(const Value& obj, const std::string& name);
/// range, namespace, dict, raise_exception, strftime_now.
void addGlobals(Evaluator& ev, std::unordered_map<std::string, Value>& vars,
                std::vector<std::weak_ptr<Namespace>>& namespaces);

// ---- argument helpers: parameter `index` (after the input) or keyword `name`
const Value* findArg(const CallArgs& args, std::size_t index, std::string_view name);
Value arg(const CallArgs& args, std::size_t index, std::string_view name, const Value& fallback = Value());
int64_t intArg(const CallArgs& args, std::size_t index, std::string_view name, int64_t fallback);
bool boolArg(const CallArgs& args, std::size_t index, std::string_view name, bool fallback);
std::string strArg(const CallArgs& args, std::size_t index, std::string_view name, const std::string& fallback);

// ---- Python semantics shared by the evaluator and the builtins
[[noreturn]] void undefinedError(const Value& v);
Value binaryOp(Evaluator& ev, const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
Value getAttr(const Value& obj, const std::string& name);
Value getItem(const Value& obj, const Value& key);
Value sliceOf(const Value& obj, const Value& start, const Value& stop, const Value& step);
/// Python's iter(): list items, dict keys, string characters; undefined is empty.
std::vector<Value> iterate(const Value& v);
/// Jinja's attribute path lookup for map/selectattr/sort: "a.b.0".
Value getAttrPath(const Value& obj, const std::string& path);

}  // namespace gizml::llm::tmpl
