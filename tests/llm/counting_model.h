#pragma once
// A real model behind a counter: the tokens of each feed of every forward pass, and the first
// feed's logits, so engine tests see what a step read and gave.
#include <gizml/tensor.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "llm/language_model.h"

namespace gizml::llm {

class CountingModel final : public LanguageModel {
 public:
  explicit CountingModel(std::unique_ptr<LanguageModel> model) : model_(std::move(model)) {}
  const ModelConfig& config() const override { return model_->config(); }
  std::unique_ptr<SequenceState> newState(int64_t maxTokens) const override { return model_->newState(maxTokens); }
  std::vector<tensor::Tensor> forward(const std::vector<Feed>& feeds) override {
    for (const Feed& f : feeds) fed.push_back(static_cast<int64_t>(f.tokens.size()));
    std::vector<tensor::Tensor> out = model_->forward(feeds);
    last = out[0].toFloats();
    return out;
  }
  std::vector<int64_t> fed;
  std::vector<float> last;

 private:
  std::unique_ptr<LanguageModel> model_;
};

}  // namespace gizml::llm
