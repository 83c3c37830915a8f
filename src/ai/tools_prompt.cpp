// Tools whatever the chat template: which templates take them (Model::calls), the generic tool
// prompt for the others (Hermes' <tool_call> format, which llm::toolCalls reads), and the
// grammar that forces calls in that format.
#include "ai/tools_prompt.h"

#include <gizml/error.h>

#include "core/json_text.h"

namespace gizml::ai {
namespace {

using Json = nlohmann::ordered_json;

// A tool call as the generic format writes it (and the grammar forces it).
std::string callText(const std::string& name, const Json& arguments) {
  return "<tool_call>\n" + jsonText(Json{{"name", name}, {"arguments", arguments}}) + "\n</tool_call>";
}

std::string preamble(const Json& tools, const ToolChoice& choice) {
  Json listed = Json::array();
  for (const Json& tool : tools) {
    const Json& f = tool["function"];
    Json entry = {{"name", f["name"]}};
    if (f.contains("description")) entry["description"] = f["description"];
    entry["parameters"] = f.contains("parameters") && f["parameters"].is_object() ? f["parameters"] : Json::object();
    listed.push_back(std::move(entry));
  }
  std::string text = "You can call these tools (their parameters as JSON Schema):\n" + jsonText(listed) +
                     "\n\nTo call a tool, answer with one block per call, each exactly:\n" +
                     callText("TOOL_NAME", Json{{"ARGUMENT", "VALUE"}}) +
                     "\nwith the arguments as one JSON object. Each result comes back in a message "
                     "<tool_response>\nRESULT\n</tool_response>.";
  if (choice.kind == ToolChoice::Required) text += " You must call at least one tool.";
  if (choice.kind == ToolChoice::Named) text += " You must call the tool " + choice.name + ".";
  if (choice.kind == ToolChoice::Auto) text += " When no tool helps, answer normally.";
  if (!choice.parallel) text += " Call one tool at most.";
  return text;
}

}  // namespace

bool templateTakesTools(const llm::Model& model) {
  return model.calls() == llm::CallFormat::Json || model.calls() == llm::CallFormat::Function;
}

Json genericToolMessages(const Json& messages, const Json& tools, const ToolChoice& choice) {
  Json out = Json::array();
  if (!tools.empty() && choice.kind != ToolChoice::None) {
    const std::string text = preamble(tools, choice);
    if (!messages.empty() && messages[0]["role"] == "system") {
      out.push_back(messages[0]);
      out[0]["content"] = text + "\n\n" + messages[0]["content"].get<std::string>();
    } else {
      out.push_back({{"role", "system"}, {"content", text}});
    }
  }
  bool afterResult = false;  // the last message out holds tool results
  for (size_t i = out.empty() ? 0 : messages[0]["role"] == "system" ? 1 : 0; i < messages.size(); ++i) {
    Json m = messages[i];
    const bool result = m["role"] == "tool";
    if (m["role"] == "assistant" && m.contains("tool_calls")) {
      std::string text = m["content"].get<std::string>();
      for (const Json& call : m["tool_calls"]) {
        if (!text.empty()) text += '\n';
        text += callText(call["function"]["name"], call["function"]["arguments"]);
      }
      m.erase("tool_calls");
      m["content"] = text;
    } else if (result) {
      // Results as user messages (templates know no tool role), consecutive ones in one.
      const std::string text = "<tool_response>\n" + m["content"].get<std::string>() + "\n</tool_response>";
      if (afterResult) {
        out.back()["content"] = out.back()["content"].get<std::string>() + "\n" + text;
        continue;
      }
      m = {{"role", "user"}, {"content", text}};
    }
    afterResult = result;
    out.push_back(std::move(m));
  }
  return out;
}

std::shared_ptr<const grammar::Grammar> toolCallGrammar(const Json& tools, const ToolChoice& choice) {
  Json calls = Json::array();
  for (const Json& tool : tools) {
    const Json& f = tool["function"];
    if (choice.kind == ToolChoice::Named && f["name"] != choice.name) continue;
    const Json parameters = f.contains("parameters") && f["parameters"].is_object() ? f["parameters"]
                                                                                    : Json{{"type", "object"}};
    calls.push_back({{"type", "object"},
                     {"properties", {{"name", {{"const", f["name"]}}}, {"arguments", parameters}}},
                     {"required", {"name", "arguments"}},
                     {"additionalProperties", false}});
  }
  check(!calls.empty(), "tool_choice: no tool to call");
  const Json schema = calls.size() == 1 ? calls[0] : Json{{"anyOf", calls}};
  return std::make_shared<const grammar::Grammar>(
      grammar::Grammar::tagged(jsonText(schema), "<tool_call>\n", "\n</tool_call>", choice.parallel ? -1 : 1));
}

}  // namespace gizml::ai
