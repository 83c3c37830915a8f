// Global functions: Jinja's range/namespace/dict and transformers' raise_exception and
// strftime_now.
#include <cstdint>
#include <ctime>

#include "gizml/error.h"
#include "llm/template/builtins.h"

namespace gizml::llm::tmpl {
namespace {

Value range(Evaluator& ev, CallArgs& args) {
  if (args.args.empty() || args.args.size() > 3) throw Error("range expects 1 to 3 integer arguments");
  for (const Value& v : args.args)
    if (!v.isInt() && !v.isBool()) throw Error("range expects integers, got " + v.typeName());
  int64_t start = 0, stop = 0, step = 1;
  if (args.args.size() == 1) {
    stop = args.args[0].asInt();
  } else {
    start = args.args[0].asInt();
    stop = args.args[1].asInt();
    if (args.args.size() == 3) step = args.args[2].asInt();
  }
  if (step == 0) throw Error("range() arg 3 must not be zero");
  // Count in unsigned arithmetic so that no bound overflows, then check before allocating.
  const uint64_t magnitude = step > 0 ? static_cast<uint64_t>(step) : static_cast<uint64_t>(-(step + 1)) + 1;
  uint64_t count = 0;
  if (step > 0 && start < stop) count = (static_cast<uint64_t>(stop) - static_cast<uint64_t>(start) - 1) / magnitude + 1;
  if (step < 0 && start > stop) count = (static_cast<uint64_t>(start) - static_cast<uint64_t>(stop) - 1) / magnitude + 1;
  ev.checkItems(count > SIZE_MAX ? SIZE_MAX : static_cast<std::size_t>(count));
  std::vector<Value> items;
  for (uint64_t i = 0; i < count; ++i)
    items.emplace_back(static_cast<int64_t>(static_cast<uint64_t>(start) + i * static_cast<uint64_t>(step)));
  return Value::list(std::move(items));
}

DictData kwargsDict(CallArgs& args, const char* fn) {
  DictData d;
  for (const Value& v : args.args) {
    if (!v.isDict()) throw Error(std::string(fn) + "() takes a dict and keyword arguments");
    for (const auto& [key, value] : v.dict().items) d.set(key, value);
  }
  for (const auto& [key, value] : args.kwargs) d.set(key, value);
  return d;
}

std::string strftimeNow(const std::string& format) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  if (format.empty()) return "";
  std::string buffer(format.size() * 16 + 64, '\0');
  const std::size_t n = std::strftime(buffer.data(), buffer.size(), format.c_str(), &local);
  buffer.resize(n);
  return buffer;
}

std::shared_ptr<Callable> fn(const char* name, std::function<Value(CallArgs&)> body) {
  return std::make_shared<Callable>(
      Callable{name, [body = std::move(body)](Evaluator&, CallArgs& args) { return body(args); }});
}

}  // namespace

void addGlobals(Evaluator& ev, std::unordered_map<std::string, Value>& vars,
                std::vector<std::weak_ptr<Namespace>>& namespaces) {
  vars["range"] = fn("range", [&ev](CallArgs& a) { return range(ev, a); });
  vars["dict"] = fn("dict", [](CallArgs& a) { return Value(kwargsDict(a, "dict")); });
  vars["namespace"] = fn("namespace", [&namespaces](CallArgs& a) {
    auto ns = std::make_shared<Namespace>(Namespace{kwargsDict(a, "namespace")});
    if (namespaces.size() >= 64 && (namespaces.size() & (namespaces.size() - 1)) == 0)
      std::erase_if(namespaces, [](const auto& weak) { return weak.expired(); });
    namespaces.push_back(ns);
    return Value(ns);
  });
  vars["raise_exception"] = fn("raise_exception", [](CallArgs& a) -> Value {
    throw TemplateError(strArg(a, 0, "message", ""));  // the template's own words, unprefixed
  });
  vars["strftime_now"] = fn("strftime_now", [](CallArgs& a) { return Value(strftimeNow(strArg(a, 0, "format", ""))); });
}

}  // namespace gizml::llm::tmpl
