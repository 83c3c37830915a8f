// Tool calls in a model's text (Hermes' JSON and Qwen's function form inside <tool_call>), and
// the probe that finds which form a chat template writes.
#include "llm/tool_calls.h"

#include <gizml/error.h>

#include <algorithm>
#include <optional>

#include "core/json_input.h"
#include "core/json_text.h"

namespace gizml::llm {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kCall = "<tool_call>", kCallEnd = "</tool_call>";
constexpr std::string_view kFunction = "<function=", kParameter = "<parameter=", kParameterEnd = "</parameter>";

bool isBlank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && isBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && isBlank(s.back())) s.remove_suffix(1);
  return s;
}

// The JSON type a tool's schema gives a parameter ("" when it says none).
std::string parameterType(const Json& tools, const std::string& function, const std::string& name) {
  if (!tools.is_array()) return "";
  for (const auto& tool : tools) {
    if (!tool.is_object()) continue;
    const auto f = tool.find("function");
    if (f == tool.end() || !f->is_object() || f->value("name", Json()) != function) continue;
    const auto params = f->find("parameters");
    if (params == f->end() || !params->is_object()) return "";
    const auto props = params->find("properties");
    if (props == params->end() || !props->is_object() || !props->contains(name)) return "";
    const auto& schema = (*props)[name];
    if (schema.is_object() && schema.contains("type") && schema["type"].is_string()) return schema["type"].get<std::string>();
    return "";
  }
  return "";
}

// A block that is no call, and why.
std::optional<ToolCall> noCall(std::string& error, std::string why) {
  error = std::move(why);
  return std::nullopt;
}

// A tag's name from start to its '>' at end: on one line, no other tag inside.
bool closedName(std::string_view body, size_t start, size_t end) {
  return end != std::string_view::npos && body.substr(start, end - start).find_first_of("<\n") == std::string_view::npos;
}

// <function=NAME><parameter=P>VALUE</parameter>...</function>; error says why it is none.
std::optional<ToolCall> functionForm(std::string_view body, const Json& tools, std::string& error) {
  const size_t nameEnd = body.find('>');
  if (!closedName(body, kFunction.size(), nameEnd)) return noCall(error, "<function= has no '>'");
  ToolCall call;
  call.name = std::string(trim(body.substr(kFunction.size(), nameEnd - kFunction.size())));
  if (call.name.empty()) return noCall(error, "<function=> names no function");
  Json args = Json::object();
  size_t at = nameEnd + 1;
  for (;;) {
    const size_t p = body.find(kParameter, at);
    if (p == std::string_view::npos) break;
    const size_t pNameEnd = body.find('>', p);
    if (!closedName(body, p + kParameter.size(), pNameEnd)) return noCall(error, "<parameter= has no '>'");
    const std::string name(trim(body.substr(p + kParameter.size(), pNameEnd - p - kParameter.size())));
    if (name.empty()) return noCall(error, "<parameter=> names no parameter");
    size_t valueEnd = body.find(kParameterEnd, pNameEnd + 1);
    size_t next = valueEnd == std::string_view::npos ? std::string_view::npos : valueEnd + kParameterEnd.size();
    if (valueEnd == std::string_view::npos) {  // unclosed: up to the next parameter or the end
      valueEnd = std::min({body.find(kParameter, pNameEnd + 1), body.find("</function>", pNameEnd + 1), body.size()});
      next = valueEnd;
    }
    std::string_view value = body.substr(pNameEnd + 1, valueEnd - pNameEnd - 1);
    while (!value.empty() && value.front() == '\n') value.remove_prefix(1);
    while (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    Json typed = std::string(value);
    if (parameterType(tools, call.name, name) != "string") {
      // JSON nested too deep stays text (one level less: the arguments object holds it).
      if (auto parsed = tryParseJson(value, kMaxJsonDepth - 1)) typed = std::move(*parsed);
    }
    args[name] = std::move(typed);
    if (next == std::string_view::npos || next >= body.size()) break;
    at = next;
  }
  call.arguments = jsonText(args);
  return call;
}

// {"name": NAME, "arguments": {...}} ("parameters" in place of "arguments", as Llama writes).
std::optional<ToolCall> jsonForm(std::string_view body, std::string& error) {
  Json j;
  try {
    j = parseJson(body);
  } catch (const JsonTooDeep& e) {
    return noCall(error, e.what());
  } catch (const Json::exception& e) {
    return noCall(error, std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) return noCall(error, "not a JSON object");
  const auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty())
    return noCall(error, "no \"name\" of the function");
  ToolCall call;
  call.name = name->get<std::string>();
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  if (args == j.end() || args->is_null()) call.arguments = "{}";
  else if (args->is_object()) call.arguments = jsonText(*args);
  else if (!args->is_string()) return noCall(error, "its \"arguments\" are not an object");
  else if (const std::optional<Json> text = tryParseJson(args->get<std::string>()); text && text->is_object())
    call.arguments = jsonText(*text);  // arguments given as JSON text, as OpenAI's API sends them
  else return noCall(error, "its \"arguments\" string is not a JSON object");
  return call;
}

}  // namespace

ToolCalls toolCalls(std::string_view text, const Json& tools) {
  ToolCalls out;
  size_t at = 0;
  for (;;) {
    const size_t open = text.find(kCall, at);
    if (open == std::string_view::npos) {
      out.rest += text.substr(at);
      break;
    }
    out.rest += text.substr(at, open - at);
    const size_t bodyStart = open + kCall.size();
    const size_t close = text.find(kCallEnd, bodyStart);
    const std::string_view body =
        trim(text.substr(bodyStart, close == std::string_view::npos ? std::string_view::npos : close - bodyStart));
    std::string error;
    std::optional<ToolCall> call;
    if (body.substr(0, 1) == "{") call = jsonForm(body, error);
    else if (body.substr(0, kFunction.size()) == kFunction) call = functionForm(body, tools, error);
    else error = body.empty() ? "it is empty" : "it holds neither a JSON object nor <function=NAME>";
    const size_t end = close == std::string_view::npos ? text.size() : close + kCallEnd.size();
    if (call) {
      out.calls.push_back(std::move(*call));
    } else {
      out.rest += text.substr(open, end - open);
      out.errors.push_back("the <tool_call> at byte " + std::to_string(open) + " is no call: " + error);
    }
    if (close == std::string_view::npos) break;
    at = end;
  }
  out.rest = std::string(trim(out.rest));
  return out;
}

const char* callFormatName(CallFormat format) {
  switch (format) {
    case CallFormat::None: return "none";
    case CallFormat::Json: return "json";
    case CallFormat::Function: return "function";
    case CallFormat::Other: return "other";
  }
  return "?";
}

CallFormat callFormatOf(const ChatTemplate& chat, const Json& variables) {
  const std::string probe = "gizml_probe_tool_7f3a";
  const Json arguments = {{"gizml_probe_arg", "probe value"}};
  const Json tools = Json::array(
      {{{"type", "function"},
        {"function",
         {{"name", probe},
          {"description", "A probe."},
          {"parameters", {{"type", "object"}, {"properties", {{"gizml_probe_arg", {{"type", "string"}}}}}}}}}}});
  // The id has 9 characters: Mistral's templates refuse others.
  const Json call = {{"id", "gizmlprb1"}, {"type", "function"}, {"function", {{"name", probe}, {"arguments", arguments}}}};
  const Json messages = Json::array({{{"role", "user"}, {"content", "Hi"}},
                                     {{"role", "assistant"}, {"content", ""}, {"tool_calls", Json::array({call})}}});
  std::string text;
  try {
    text = chat.renderChat(messages, tools, false, variables);
  } catch (const Error&) {
    return CallFormat::None;  // a template that fails on tools writes none
  }
  if (text.find(probe) == std::string::npos) return CallFormat::None;
  for (const ToolCall& read : toolCalls(text, tools).calls)
    if (read.name == probe && tryParseJson(read.arguments) == arguments)
      return text.find(std::string(kFunction) + probe) != std::string::npos ? CallFormat::Function : CallFormat::Json;
  return CallFormat::Other;
}

}  // namespace gizml::llm
