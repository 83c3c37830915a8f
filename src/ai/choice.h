#pragma once
// One choice of a completion (of n) as OpenAI sends it: its tokens turned into text, reasoning,
// content and tool calls, with their log probabilities, as stream chunks or one whole choice.
#include <gizml/llm.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ai/answer.h"
#include "ai/openai.h"
#include "ai/scheduler.h"

namespace gizml::ai {

class ChoiceWriter {
 public:
  using Json = nlohmann::ordered_json;
  /// index: the choice's place in choices[]; newId makes the ids of its tool calls.
  ChoiceWriter(const Tokenizer& tokenizer, const Generation& g, size_t index, std::string (*newId)());

  /// A take of this choice: its new tokens and their text, and its end when it came.
  void take(Job::Choice& taken);
  /// Its end came (a stop string's too: the engine ends the request there).
  bool finished() const { return finished_; }
  int64_t completionTokens() const { return tokens_; }

  /// Stream: the first chunk's choice (the role).
  Json opening() const;
  /// Stream: the choices of the chunks for what the last take gave: content, reasoning and log
  /// probabilities; each new tool call as a delta with its index, id, type, name and arguments
  /// "", then one with its arguments; and at the end an empty delta with finish_reason.
  std::vector<Json> chunks();
  /// Whole: the choice once finished().
  Json whole() const;

 private:
  const char* finishReason() const;
  const Tokenizer& tokenizer_;
  bool chat_;
  size_t index_;
  int logprobs_;
  bool parallelCalls_;
  std::string (*newId_)();
  AnswerStream answer_;

  bool finished_ = false;
  llm::Finish finish_ = llm::Finish::Running;
  int64_t tokens_ = 0;
  // The last take's pieces, for chunks().
  AnswerStream::Delta delta_;
  Json stepLogprobs_;   // chat: logprobs.content entries; completions: {tokens, token_logprobs, ...}
  bool endPending_ = false;
  // All of it, for whole().
  std::string content_, reasoning_;
  Json calls_ = Json::array();  // tool_calls entries, with their index
  Json wholeLogprobs_;
  size_t textOffset_ = 0;
};

}  // namespace gizml::ai
