#pragma once
// Python's two string formatting languages: str.format ("{0:>8.2f}") and printf-style
// ("%-5s %03d"), for the format method, the % operator and the |format filter.
#include <string>

#include "llm/template/builtins.h"

namespace gizml::llm::tmpl {

/// fmt.format(*args.args, **args.kwargs).
std::string pyFormat(Evaluator& ev, const std::string& fmt, const CallArgs& args);
/// fmt % values: a tuple gives the positional values, a dict the %(name)s ones, anything else is
/// the one value.
std::string pyPercent(Evaluator& ev, const std::string& fmt, const Value& values);

}  // namespace gizml::llm::tmpl
