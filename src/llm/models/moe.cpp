#include "llm/models/moe.h"

#include <gizml/error.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gizml::llm {

MoeMlp::MoeMlp(const ConvertedModel& weights, const std::string& prefix, const ModelConfig& c)
    : hidden_(c.hiddenSize), topK_(c.numExpertsPerToken) {
  check(c.numExperts > 0 && topK_ > 0 && topK_ <= c.numExperts,
        "MoE: num_experts_per_tok (" + std::to_string(topK_) + ") must be in 1.." + std::to_string(c.numExperts));
  router_ = Linear(weights, prefix + "gate.weight", c.numExperts, hidden_);
  for (int64_t e = 0; e < c.numExperts; ++e)
    experts_.emplace_back(weights, prefix + "experts." + std::to_string(e) + ".", hidden_, c.moeIntermediateSize,
                          Activation::Silu);
  shared_ = GatedMlp(weights, prefix + "shared_expert.", hidden_, c.sharedExpertIntermediateSize, Activation::Silu);
  sharedGate_ = Linear(weights, prefix + "shared_expert_gate.weight", 1, hidden_);
}

void MoeMlp::forward(const float* x, int64_t rows, float* out) const {
  const auto experts = static_cast<int64_t>(experts_.size());
  std::vector<float> scores(static_cast<size_t>(rows * experts));
  router_.apply(x, rows, scores.data());
  // Each expert's rows and their weights, from every row's top k.
  std::vector<std::vector<int64_t>> routed(static_cast<size_t>(experts));
  std::vector<std::vector<float>> weightsOf(static_cast<size_t>(experts));
  std::vector<int64_t> order(static_cast<size_t>(experts));
  for (int64_t r = 0; r < rows; ++r) {
    float* p = scores.data() + r * experts;
    const float top = *std::max_element(p, p + experts);
    float sum = 0.0f;
    for (int64_t e = 0; e < experts; ++e) sum += (p[e] = std::exp(p[e] - top));
    for (int64_t e = 0; e < experts; ++e) p[e] /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    float kept = 0.0f;
    for (int64_t i = 0; i < topK_; ++i) kept += p[order[static_cast<size_t>(i)]];
    for (int64_t i = 0; i < topK_; ++i) {
      const int64_t e = order[static_cast<size_t>(i)];
      routed[static_cast<size_t>(e)].push_back(r);
      weightsOf[static_cast<size_t>(e)].push_back(p[e] / kept);
    }
  }
  std::fill(out, out + rows * hidden_, 0.0f);
  std::vector<float> in, y;
  for (int64_t e = 0; e < experts; ++e) {
    const std::vector<int64_t>& mine = routed[static_cast<size_t>(e)];
    if (mine.empty()) continue;
    const auto n = static_cast<int64_t>(mine.size());
    in.resize(static_cast<size_t>(n * hidden_));
    y.resize(in.size());
    for (int64_t i = 0; i < n; ++i) std::copy(x + mine[static_cast<size_t>(i)] * hidden_, x + (mine[static_cast<size_t>(i)] + 1) * hidden_, in.begin() + i * hidden_);
    experts_[static_cast<size_t>(e)].forward(in.data(), n, y.data());
    for (int64_t i = 0; i < n; ++i) {
      float* o = out + mine[static_cast<size_t>(i)] * hidden_;
      const float w = weightsOf[static_cast<size_t>(e)][static_cast<size_t>(i)];
      for (int64_t j = 0; j < hidden_; ++j) o[j] += w * y[static_cast<size_t>(i * hidden_ + j)];
    }
  }
  std::vector<float> shared(static_cast<size_t>(rows * hidden_)), gate(static_cast<size_t>(rows));
  shared_.forward(x, rows, shared.data());
  sharedGate_.apply(x, rows, gate.data());
  for (int64_t r = 0; r < rows; ++r) {
    const float g = 1.0f / (1.0f + std::exp(-gate[static_cast<size_t>(r)]));
    for (int64_t j = 0; j < hidden_; ++j) out[r * hidden_ + j] += g * shared[static_cast<size_t>(r * hidden_ + j)];
  }
}

}  // namespace gizml::llm
