// Streaming a chat answer's text: reasoning, content and tool calls apart (Qwen's <think>; the
// <tool_call> blocks read by llm::toolCalls as each closes).
#include "ai/answer.h"

#include <algorithm>

#include "llm/engine/stop_text.h"

namespace gizml::ai {
using llm::heldBack;

namespace {

constexpr std::string_view kThink = "<think>", kThinkEnd = "</think>";
constexpr std::string_view kCall = "<tool_call>", kCallEnd = "</tool_call>";

bool isBlank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

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
    takeCalls(d, std::string_view(toolText_).substr(0, end));
    toolText_.erase(0, end);
  }
}

void AnswerStream::takeCalls(Delta& d, std::string_view text) {
  llm::ToolCalls read = llm::toolCalls(text, tools_);
  for (ToolCall& call : read.calls) {
    calls_.push_back(call);
    d.calls.push_back(std::move(call));
  }
  if (!read.rest.empty()) notCalls_ += (notCalls_.empty() ? "" : "\n") + read.rest;
}

AnswerStream::Delta AnswerStream::push(std::string_view text) {
  pending_ += text;
  return run(false);
}

AnswerStream::Delta AnswerStream::finish() {
  Delta d = run(true);
  if (mode_ == Mode::Tools) {
    takeCalls(d, toolText_);
    toolText_.clear();
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
