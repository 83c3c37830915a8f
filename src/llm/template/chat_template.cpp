#include "gizml/chat_template.h"

#include "gizml/error.h"
#include "llm/template/evaluator.h"
#include "llm/template/parser.h"

namespace gizml::llm {

ChatTemplate ChatTemplate::parse(const std::string& source) {
  ChatTemplate t;
  t.template_ = tmpl::parseTemplate(source);
  return t;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context, const TemplateLimits& limits) const {
  check(context.is_object(), "chat template: the context must be a JSON object");
  const tmpl::Value vars = tmpl::Value::fromJson(context);
  tmpl::Evaluator evaluator(limits, vars.dict());
  return evaluator.render(*template_);
}

std::string ChatTemplate::renderChat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                     bool addGenerationPrompt, const nlohmann::ordered_json& extraVars) const {
  check(messages.is_array(), "chat template: messages must be a JSON array");
  check(tools.is_null() || tools.is_array(), "chat template: tools must be a JSON array");
  check(extraVars.is_object(), "chat template: extra variables must be a JSON object");
  // Straight into template values, depth-checked: copying request JSON into one context object
  // would recurse through it unchecked.
  tmpl::DictData context;
  context.set("messages", tmpl::Value::fromJson(messages, 1));
  if (!tools.is_null() && !tools.empty()) context.set("tools", tmpl::Value::fromJson(tools, 1));
  context.set("add_generation_prompt", addGenerationPrompt);
  for (const auto& [key, value] : extraVars.items()) context.set(key, tmpl::Value::fromJson(value, 1));
  const TemplateLimits limits;  // outlives the evaluator, which keeps a reference
  tmpl::Evaluator evaluator(limits, context);
  return evaluator.render(*template_);
}

}  // namespace gizml::llm
