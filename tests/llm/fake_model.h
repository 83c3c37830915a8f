#pragma once
// A deterministic stand-in for an architecture: its logits are a fixed function of the tokens
// a sequence has read, so tests can compute what the engine must give. It records every
// forward pass and can be told to fail.
#include <gizml/error.h>
#include <gizml/tensor.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "llm/language_model.h"

namespace gizml::llm::fake {

class FakeState : public SequenceState {
 public:
  explicit FakeState(int64_t capacity) : capacity_(capacity) {}
  int64_t length() const override { return static_cast<int64_t>(tokens.size()); }
  int64_t capacity() const override { return capacity_; }
  void truncate(int64_t n) override { tokens.resize(static_cast<size_t>(n)); }
  std::vector<int32_t> tokens;

 private:
  int64_t capacity_;
};

/// Next-token logits of a sequence: a wave over the vocabulary whose phase depends on the last
/// token and the length.
inline std::vector<float> fakeLogits(const std::vector<int32_t>& tokens, int64_t vocab) {
  std::vector<float> row(static_cast<size_t>(vocab));
  const double last = tokens.back(), length = static_cast<double>(tokens.size());
  for (int64_t j = 0; j < vocab; ++j)
    row[static_cast<size_t>(j)] = static_cast<float>(3.0 * std::cos(0.7 * static_cast<double>(j) + 1.3 * last + 0.1 * length));
  return row;
}

/// What greedy decoding of the fake model gives, computed without the engine.
inline std::vector<int32_t> greedyReference(std::vector<int32_t> seq, int64_t limit, const std::vector<int32_t>& ends = {},
                                            int64_t vocab = 32) {
  std::vector<int32_t> out;
  while (static_cast<int64_t>(out.size()) < limit) {
    const std::vector<float> row = fakeLogits(seq, vocab);
    const auto token = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    out.push_back(token);
    seq.push_back(token);
    if (std::find(ends.begin(), ends.end(), token) != ends.end()) break;
  }
  return out;
}

class FakeModel : public LanguageModel {
 public:
  explicit FakeModel(int64_t vocab = 32) {
    config_.vocabSize = vocab;
    config_.maxPositions = 4096;
  }
  const ModelConfig& config() const override { return config_; }
  std::unique_ptr<SequenceState> newState(int64_t maxTokens) const override {
    return std::make_unique<FakeState>(maxTokens);
  }
  std::vector<tensor::Tensor> forward(const std::vector<Feed>& feeds) override {
    ++passes;
    fedTokens.emplace_back();
    if (failNext) {
      failNext = false;
      throw Error("fake: forward failed");
    }
    std::vector<tensor::Tensor> out;
    for (const Feed& feed : feeds) {
      auto& state = dynamic_cast<FakeState&>(*feed.state);
      check(state.length() + static_cast<int64_t>(feed.tokens.size()) <= state.capacity(), "fake: state is full");
      state.tokens.insert(state.tokens.end(), feed.tokens.begin(), feed.tokens.end());
      fedTokens.back().push_back(feed.tokens.size());
      const std::vector<float> row = fakeLogits(state.tokens, config_.vocabSize);
      out.push_back(tensor::tensor({1, config_.vocabSize}, std::vector<double>(row.begin(), row.end())));
    }
    return out;
  }

  ModelConfig config_;
  int passes = 0;
  std::vector<std::vector<size_t>> fedTokens;  // per pass, the tokens of each feed
  bool failNext = false;
};

}  // namespace gizml::llm::fake
