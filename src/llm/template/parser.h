#pragma once
#include <memory>
#include <string>

#include "llm/template/ast.h"

namespace gizml::llm::tmpl {

/// Parses template source; syntax errors throw gizml::Error with line and column.
std::shared_ptr<const Template> parseTemplate(const std::string& source);

}  // namespace gizml::llm::tmpl
