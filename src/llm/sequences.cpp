// Sequences: a converted model's forward passes over sequences fed by the caller, each pass one
// LanguageModel::forward of all of them (what an engine step runs, without its slots).
#include <gizml/error.h>
#include <gizml/llm.h>

#include "llm/language_model.h"
#include "llm/quant/converted_model.h"

namespace gizml::llm {

struct Sequences::Impl {
  std::unique_ptr<LanguageModel> model;  // it keeps the weights' mapping open
  std::vector<std::unique_ptr<SequenceState>> states;
};

Sequences::Sequences(const std::string& folder, int64_t count, int64_t maxTokens, KvFormat kvCache,
                     const std::optional<gizhw::gpu::Gpu>& gpu)
    : impl_(std::make_unique<Impl>()) {
  check(count >= 1, "Sequences: count must be at least 1, not " + std::to_string(count));
  impl_->model = buildLanguageModel(ConvertedModel::open(folder), {.kvCache = kvCache, .gpu = gpu});
  for (int64_t s = 0; s < count; ++s) impl_->states.push_back(impl_->model->newState(maxTokens));
}

Sequences::Sequences(Sequences&&) noexcept = default;
Sequences& Sequences::operator=(Sequences&&) noexcept = default;
Sequences::~Sequences() = default;

int64_t Sequences::vocabSize() const { return impl_->model->config().vocabSize; }

std::vector<tensor::Tensor> Sequences::forward(const std::vector<std::vector<TokenId>>& tokens, bool allLogits) {
  check(tokens.size() == impl_->states.size(), "Sequences::forward: " + std::to_string(tokens.size()) +
                                                   " lists of tokens for " + std::to_string(impl_->states.size()) +
                                                   " sequences");
  std::vector<Feed> feeds;
  feeds.reserve(tokens.size());
  for (size_t s = 0; s < tokens.size(); ++s) feeds.push_back({impl_->states[s].get(), tokens[s], allLogits});
  return impl_->model->forward(feeds);
}

void Sequences::clear() {
  for (const std::unique_ptr<SequenceState>& state : impl_->states) state->truncate(0);
}

}  // namespace gizml::llm
