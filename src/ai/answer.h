#pragma once
// A request's tokens turned into the text the server sends, as they come: whole UTF-8
// characters only, cut at the first stop string and never showing the start of one that may
// still complete; then (chat) split into reasoning, content and tool calls.
#include <gizml/ai.h>
#include <gizml/llm.h>

#include <string>
#include <string_view>
#include <vector>

namespace gizml::ai {

using llm::TokenId;
using llm::Tokenizer;

/// Tokens -> text safe to send now.
class TextStream {
 public:
  TextStream(const Tokenizer& tokenizer, std::vector<std::string> stops);
  /// The text that token completes and that can no longer be part of a stop string.
  std::string push(TokenId token);
  /// At the end of the request: what was held back (no stop string after all).
  std::string finish();
  /// A stop string was found: the text before it was sent, nothing after it will be.
  bool stopped() const { return stopped_; }

 private:
  std::string release();  // takes from pending_ what is safe
  llm::StreamDecoder decoder_;
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

/// The longest suffix of text that begins one of the markers (shorter than it), in bytes.
size_t heldBack(std::string_view text, const std::vector<std::string_view>& markers);

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
