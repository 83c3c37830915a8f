#pragma once
// Tools for every chat template: whether a model's template takes a request's tools, the
// generic tool prompt for those that do not (docs/serve.md), and the grammar that forces a call
// (tool_choice "required" or a named function).
#include <gizml/grammar.h>
#include <gizml/llm.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace gizml::ai {

/// Whether the server gives a request's tools to the model's chat template: it writes calls in
/// a form llm::toolCalls reads (Model::calls). Other models get the generic tool prompt.
bool templateTakesTools(const llm::Model& model);

/// What the request asks of the model's calls (tool_choice, parallel_tool_calls).
struct ToolChoice {
  enum Kind { Auto, None, Required, Named } kind = Auto;
  std::string name;     // Named: the function
  bool parallel = true;  // false: one call at most
};

/// The messages (normalized, arguments as objects) for a template that writes no tools: a system
/// preamble listing the tools as JSON with the call format, earlier calls as the text of that
/// format, tool results as user messages in <tool_response> tags.
nlohmann::ordered_json genericToolMessages(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                           const ToolChoice& choice);

/// Text that is one call of a tool, or (parallel) one or more: <tool_call>\n{"name": NAME,
/// "arguments": ARGS}\n</tool_call>, NAME one of the tools (only choice.name when Named) and ARGS
/// what its parameters' schema admits. Throws gizml::Error when a schema is not supported.
std::shared_ptr<const grammar::Grammar> toolCallGrammar(const nlohmann::ordered_json& tools, const ToolChoice& choice);

}  // namespace gizml::ai
