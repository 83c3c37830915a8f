// Reading builtin arguments by position or keyword, as Python binds them.
#include "gizml/error.h"
#include "llm/template/builtins.h"

namespace gizml::llm::tmpl {

const Value* findArg(const CallArgs& args, std::size_t index, std::string_view name) {
  if (index < args.args.size()) return &args.args[index];
  for (const auto& [key, value] : args.kwargs)
    if (key == name) return &value;
  return nullptr;
}

Value arg(const CallArgs& args, std::size_t index, std::string_view name, const Value& fallback) {
  const Value* v = findArg(args, index, name);
  return v ? *v : fallback;
}

int64_t intArg(const CallArgs& args, std::size_t index, std::string_view name, int64_t fallback) {
  const Value* v = findArg(args, index, name);
  if (!v || v->isNone()) return fallback;
  if (!v->isInt() && !v->isBool()) throw Error("argument '" + std::string(name) + "' must be an integer");
  return v->asInt();
}

bool boolArg(const CallArgs& args, std::size_t index, std::string_view name, bool fallback) {
  const Value* v = findArg(args, index, name);
  return v ? v->truthy() : fallback;
}

std::string strArg(const CallArgs& args, std::size_t index, std::string_view name, const std::string& fallback) {
  const Value* v = findArg(args, index, name);
  return v ? v->toString() : fallback;
}

}  // namespace gizml::llm::tmpl
