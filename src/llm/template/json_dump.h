#pragma once
// tojson as transformers defines it: Python's json.dumps(x, ensure_ascii=False, indent=None,
// separators=None, sort_keys=False), byte for byte.
#include <cstddef>
#include <optional>
#include <string>

#include "llm/template/value.h"

namespace gizml::llm::tmpl {

struct JsonOptions {
  std::optional<std::string> indent;  // the per-level indent; unset: one line
  std::string itemSeparator = ", ";   // json.dumps uses "," when indenting
  std::string keySeparator = ": ";
  bool ensureAscii = false;
  bool sortKeys = false;
  std::size_t maxBytes = std::size_t(-1);  // throw beyond this (huge indents)
};

std::string dumpJson(const Value& value, const JsonOptions& options);

}  // namespace gizml::llm::tmpl
