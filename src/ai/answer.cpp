// Streaming a request's text: stop strings held back and cut, then reasoning, content and tool
// calls apart (Qwen's <think> and <tool_call> formats).
#include "ai/answer.h"

#include <algorithm>

#include "core/json_input.h"

namespace gizml::ai {
namespace {

constexpr std::string_view kThink = "<think>", kThinkEnd = "</think>";
constexpr std::string_view kCall = "<tool_call>", kCallEnd = "</tool_call>";

bool isBlank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && isBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && isBlank(s.back())) s.remove_suffix(1);
  return s;
}

// The JSON type a tool's schema gives a parameter ("" when it says none).
std::string parameterType(const nlohmann::ordered_json& tools, const std::string& function, const std::string& name) {
  if (!tools.is_array()) return "";
  for (const auto& tool : tools) {
    if (!tool.is_object()) continue;
    const auto f = tool.find("function");
    if (f == tool.end() || !f->is_object() || f->value("name", nlohmann::ordered_json()) != function) continue;
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

// <function=NAME><parameter=P>VALUE</parameter>...</function>
std::optional<ToolCall> functionForm(std::string_view body, const nlohmann::ordered_json& tools) {
  constexpr std::string_view open = "<function=", param = "<parameter=", paramEnd = "</parameter>";
  if (body.substr(0, open.size()) != open) return std::nullopt;
  const size_t nameEnd = body.find('>');
  if (nameEnd == std::string_view::npos) return std::nullopt;
  ToolCall call;
  call.name = std::string(trim(body.substr(open.size(), nameEnd - open.size())));
  if (call.name.empty()) return std::nullopt;
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  size_t at = nameEnd + 1;
  for (;;) {
    const size_t p = body.find(param, at);
    if (p == std::string_view::npos) break;
    const size_t pNameEnd = body.find('>', p);
    if (pNameEnd == std::string_view::npos) return std::nullopt;
    const std::string name(trim(body.substr(p + param.size(), pNameEnd - p - param.size())));
    size_t valueEnd = body.find(paramEnd, pNameEnd + 1);
    size_t next = valueEnd == std::string_view::npos ? std::string_view::npos : valueEnd + paramEnd.size();
    if (valueEnd == std::string_view::npos) {  // unclosed: up to the next parameter or the end
      valueEnd = std::min({body.find(param, pNameEnd + 1), body.find("</function>", pNameEnd + 1), body.size()});
      next = valueEnd;
    }
    std::string_view value = body.substr(pNameEnd + 1, valueEnd - pNameEnd - 1);
    while (!value.empty() && value.front() == '\n') value.remove_prefix(1);
    while (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    nlohmann::ordered_json typed = std::string(value);
    if (parameterType(tools, call.name, name) != "string") {
      // Model output is outside input: JSON nested too deep stays text.
      if (auto parsed = tryParseJson(value)) typed = std::move(*parsed);
    }
    args[name] = std::move(typed);
    if (next == std::string_view::npos || next >= body.size()) break;
    at = next;
  }
  call.arguments = args.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return call;
}

// {"name": NAME, "arguments": {...}}
std::optional<ToolCall> jsonForm(std::string_view body) {
  const std::optional<nlohmann::ordered_json> parsed = tryParseJson(body);  // too deep: no call
  if (!parsed || !parsed->is_object()) return std::nullopt;
  const nlohmann::ordered_json& j = *parsed;
  const auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  ToolCall call;
  call.name = name->get<std::string>();
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  if (args == j.end() || args->is_null()) call.arguments = "{}";
  else if (args->is_string()) call.arguments = args->get<std::string>();
  else call.arguments = args->dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return call;
}

}  // namespace

size_t heldBack(std::string_view text, const std::vector<std::string_view>& markers) {
  size_t best = 0;
  for (std::string_view m : markers)
    for (size_t k = std::min(m.size() - (m.empty() ? 0 : 1), text.size()); k > best; --k)
      if (text.substr(text.size() - k) == m.substr(0, k)) {
        best = k;
        break;
      }
  return best;
}

std::vector<ToolCall> parseToolCalls(std::string_view text, const nlohmann::ordered_json& tools, std::string& rest) {
  std::vector<ToolCall> calls;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t open = text.find(kCall, at);
    if (open == std::string_view::npos) {
      rest += text.substr(at);
      break;
    }
    rest += text.substr(at, open - at);
    const size_t bodyStart = open + kCall.size();
    const size_t close = text.find(kCallEnd, bodyStart);
    const std::string_view body =
        trim(text.substr(bodyStart, close == std::string_view::npos ? std::string_view::npos : close - bodyStart));
    std::optional<ToolCall> call = body.substr(0, 1) == "{" ? jsonForm(body) : functionForm(body, tools);
    const size_t end = close == std::string_view::npos ? text.size() : close + kCallEnd.size();
    if (call) calls.push_back(std::move(*call));
    else rest += text.substr(open, end - open);
    at = end;
    if (close == std::string_view::npos) break;
  }
  rest = std::string(trim(rest));
  return calls;
}

TextStream::TextStream(const Tokenizer& tokenizer, std::vector<std::string> stops)
    : decoder_(tokenizer, true), stops_(std::move(stops)) {}

std::string TextStream::release() {
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  std::vector<std::string_view> markers(stops_.begin(), stops_.end());
  const size_t keep = heldBack(pending_, markers);
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string TextStream::push(TokenId token) {
  if (stopped_) return "";
  pending_ += decoder_.push(token);
  return release();
}

std::string TextStream::finish() {
  if (stopped_) return "";
  pending_ += decoder_.flush();
  std::string out = release();
  if (!stopped_) out += pending_;
  pending_.clear();
  return out;
}

AnswerStream::AnswerStream(bool reasoning, nlohmann::ordered_json tools, bool inReasoning)
    : reasoning_(reasoning),
      tools_(std::move(tools)),
      mode_(inReasoning && reasoning ? Mode::Reasoning : Mode::Content),
      thinkChecked_(mode_ == Mode::Reasoning) {}

void AnswerStream::addContent(Delta& d, std::string_view text) {
  if (!contentStarted_) {
    while (!text.empty() && isBlank(text.front())) text.remove_prefix(1);
    if (text.empty()) return;
    contentStarted_ = true;
  }
  d.content += text;
}

AnswerStream::Delta AnswerStream::run(bool atEnd) {
  Delta d;
  for (;;) {
    if (mode_ == Mode::Tools) {
      toolText_ += pending_;
      pending_.clear();
      takeClosedCalls(d);
      break;
    }
    if (mode_ == Mode::Reasoning) {
      const size_t end = pending_.find(kThinkEnd);
      if (end != std::string::npos) {
        d.reasoning += pending_.substr(0, end);
        pending_.erase(0, end + kThinkEnd.size());
        mode_ = Mode::Content;
        continue;
      }
      const size_t keep = atEnd ? 0 : heldBack(pending_, {kThinkEnd});
      d.reasoning += pending_.substr(0, pending_.size() - keep);
      pending_.erase(0, pending_.size() - keep);
      break;
    }
    // <think> opens reasoning only at the start of the answer (after blanks).
    if (reasoning_ && !thinkChecked_) {
      const size_t first = pending_.find_first_not_of(" \n\r\t");
      if (first == std::string::npos && !atEnd) break;
      const std::string_view start = first == std::string::npos ? "" : std::string_view(pending_).substr(first);
      if (start.substr(0, kThink.size()) == kThink) {
        pending_.erase(0, first + kThink.size());
        mode_ = Mode::Reasoning;
        thinkChecked_ = true;
        continue;
      }
      if (!atEnd && kThink.substr(0, start.size()) == start) break;  // may still become <think>
      thinkChecked_ = true;
    }
    std::vector<std::string_view> markers;
    if (tools_.is_array() && !tools_.empty()) markers.push_back(kCall);
    size_t at = std::string::npos;
    std::string_view marker;
    for (std::string_view m : markers)
      if (const size_t p = pending_.find(m); p < at) at = p, marker = m;
    if (at != std::string::npos) {
      addContent(d, std::string_view(pending_).substr(0, at));
      pending_.erase(0, at + marker.size());
      mode_ = Mode::Tools;
      toolText_ = std::string(kCall);
      continue;
    }
    size_t keep = atEnd ? 0 : heldBack(pending_, markers);
    // Leading blanks wait: they are dropped, or come with the content that follows them.
    if (!contentStarted_ && !atEnd && std::all_of(pending_.begin(), pending_.end() - static_cast<std::ptrdiff_t>(keep), isBlank))
      break;
    addContent(d, std::string_view(pending_).substr(0, pending_.size() - keep));
    pending_.erase(0, pending_.size() - keep);
    break;
  }
  return d;
}

void AnswerStream::takeClosedCalls(Delta& d) {
  for (size_t close; (close = toolText_.find(kCallEnd)) != std::string::npos;) {
    const size_t end = close + kCallEnd.size();
    std::string rest;
    for (ToolCall& call : parseToolCalls(std::string_view(toolText_).substr(0, end), tools_, rest)) {
      calls_.push_back(call);
      d.calls.push_back(std::move(call));
    }
    if (!rest.empty()) notCalls_ += (notCalls_.empty() ? "" : "\n") + rest;
    toolText_.erase(0, end);
  }
}

AnswerStream::Delta AnswerStream::push(std::string_view text) {
  pending_ += text;
  return run(false);
}

AnswerStream::Delta AnswerStream::finish() {
  Delta d = run(true);
  if (mode_ == Mode::Tools) {
    std::string rest;
    for (ToolCall& call : parseToolCalls(toolText_, tools_, rest)) {
      calls_.push_back(call);
      d.calls.push_back(std::move(call));
    }
    toolText_.clear();
    if (!rest.empty()) notCalls_ += (notCalls_.empty() ? "" : "\n") + rest;
    if (!notCalls_.empty()) addContent(d, (contentStarted_ ? "\n" : "") + notCalls_);
    notCalls_.clear();
  }
  return d;
}

Answer parseAnswer(std::string_view text, const nlohmann::ordered_json& tools, bool inReasoning) {
  AnswerStream stream(true, tools.is_array() && !tools.empty() ? tools : nlohmann::ordered_json::array({nlohmann::ordered_json::object()}),
                      inReasoning);
  Answer out;
  for (AnswerStream::Delta d : {stream.push(text), stream.finish()}) {
    out.reasoning += d.reasoning;
    out.content += d.content;
  }
  out.calls = stream.calls();
  return out;
}

}  // namespace gizml::ai
