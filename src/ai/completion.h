#pragma once
// One completion as OpenAI sends it: its choices (ChoiceWriter) as the scheduler gives them, in
// the frame every response and chunk shares (id, object, created, model, system_fingerprint),
// and its usage.
#include <gizml/llm.h>

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ai/choice.h"
#include "ai/openai.h"
#include "ai/scheduler.h"

namespace gizml::ai {

class Completion {
 public:
  using Json = nlohmann::ordered_json;
  /// model and fingerprint: the served model's name and system_fingerprint; newId makes ids.
  Completion(const Generation& g, const Tokenizer& tokenizer, std::string model, std::string fingerprint,
             std::string (*newId)());

  /// What a wait on the job gave: each choice's tokens, text and end.
  void take(Job::Taken& taken);
  /// Every choice has ended.
  bool finished() const;

  /// A chunk (stream) or the whole response: the frame with these choices.
  Json framed(Json choices) const;
  /// Stream: the chunks' choices for what the last take gave (the roles first, in the first).
  std::vector<Json> chunks();
  /// Whole: the response, its usage included.
  Json whole() const;
  Json usage() const;

 private:
  bool chat_, stream_;
  std::string id_, model_, fingerprint_;
  std::time_t created_ = std::time(nullptr);
  int64_t promptTokens_ = 0, cached_ = 0;
  std::vector<ChoiceWriter> choices_;
  bool opened_ = false;  // stream: the roles were given
};

}  // namespace gizml::ai
