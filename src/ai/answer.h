#pragma once
// A chat answer's text (the engine's, safe to send: llm::StopText) split as it comes into
// reasoning, content and tool calls.
#include <gizml/ai.h>
#include <gizml/llm.h>

#include <string>
#include <string_view>
#include <vector>

namespace gizml::ai {

using llm::TokenId;
using llm::Tokenizer;

/// Text -> reasoning, content and tool calls as they come (each call once its </tool_call>
/// arrived, an unclosed one at the end).
class AnswerStream {
 public:
  struct Delta {
    std::string reasoning, content;
    std::vector<ToolCall> calls;  // the calls completed by this text
    bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
  };
  /// reasoning: split <think> sections out; tools: the request's tool list (empty: no tool calls
  /// are read); inReasoning: the prompt ends inside a <think> the template opened.
  AnswerStream(bool reasoning, nlohmann::ordered_json tools, bool inReasoning);
  Delta push(std::string_view text);
  /// The held-back rest, and the calls not closed yet; all calls are in calls() after it.
  Delta finish();
  const std::vector<ToolCall>& calls() const { return calls_; }

 private:
  enum class Mode { Content, Reasoning, Tools };
  Delta run(bool atEnd);
  void addContent(Delta& d, std::string_view text);
  bool reasoning_;
  nlohmann::ordered_json tools_;
  Mode mode_;
  bool thinkChecked_;  // the answer's start was seen not to be (or to be) a <think>
  void takeClosedCalls(Delta& d);
  void takeCalls(Delta& d, std::string_view text);  // llm::toolCalls; what is no call waits in notCalls_
  std::string pending_, toolText_;
  std::string notCalls_;  // text of the tool section that was no call, shown as content at the end
  bool contentStarted_ = false;  // content with something other than white space was sent
  std::vector<ToolCall> calls_;
};

}  // namespace gizml::ai
