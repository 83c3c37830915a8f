// A completion's frame and usage around its choices (completion.h).
#include "ai/completion.h"

#include <algorithm>

namespace gizml::ai {

Completion::Completion(const Generation& g, const Tokenizer& tokenizer, std::string model, std::string fingerprint,
                       std::string (*newId)())
    : chat_(g.chat),
      stream_(g.stream),
      id_((g.chat ? "chatcmpl-" : "cmpl-") + newId()),
      model_(std::move(model)),
      fingerprint_(std::move(fingerprint)),
      promptTokens_(static_cast<int64_t>(g.request.prompt.size())) {
  for (int i = 0; i < g.choices; ++i) choices_.emplace_back(tokenizer, g, static_cast<size_t>(i), newId);
}

void Completion::take(Job::Taken& taken) {
  cached_ = taken.cached;
  for (size_t i = 0; i < choices_.size(); ++i) choices_[i].take(taken.choices[i]);
}

bool Completion::finished() const {
  return std::all_of(choices_.begin(), choices_.end(), [](const ChoiceWriter& c) { return c.finished(); });
}

Completion::Json Completion::framed(Json choices) const {
  const char* object = chat_ ? (stream_ ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return Json{{"id", id_}, {"object", object}, {"created", created_}, {"model", model_},
              {"system_fingerprint", fingerprint_}, {"choices", std::move(choices)}};
}

std::vector<Completion::Json> Completion::chunks() {
  std::vector<Json> out;
  if (chat_ && !opened_)
    for (const ChoiceWriter& c : choices_) out.push_back(c.opening());
  opened_ = true;
  for (ChoiceWriter& c : choices_)
    for (Json& choice : c.chunks()) out.push_back(std::move(choice));
  return out;
}

Completion::Json Completion::whole() const {
  Json all = Json::array();
  for (const ChoiceWriter& c : choices_) all.push_back(c.whole());
  Json body = framed(std::move(all));
  body["usage"] = usage();
  return body;
}

Completion::Json Completion::usage() const {
  int64_t completion = 0;
  for (const ChoiceWriter& c : choices_) completion += c.completionTokens();
  return Json{{"prompt_tokens", promptTokens_}, {"completion_tokens", completion},
              {"total_tokens", promptTokens_ + completion}, {"prompt_tokens_details", {{"cached_tokens", cached_}}}};
}

}  // namespace gizml::ai
