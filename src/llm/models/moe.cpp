#include "llm/models/moe.h"

#include <gizml/error.h>

#include "llm/ops/host.h"
#include "llm/ops/moe.h"

namespace gizml::llm {

MoeMlp::MoeMlp(const ConvertedModel& weights, const std::string& prefix, const ModelConfig& c, bool onDevice)
    : hidden_(c.hiddenSize), topK_(c.numExpertsPerToken) {
  check(c.numExperts > 0 && topK_ > 0 && topK_ <= c.numExperts,
        "MoE: num_experts_per_tok (" + std::to_string(topK_) + ") must be in 1.." + std::to_string(c.numExperts));
  router_ = Linear(weights, prefix + "gate.weight", c.numExperts, hidden_);
  for (int64_t e = 0; e < c.numExperts; ++e)
    experts_.emplace_back(weights, prefix + "experts." + std::to_string(e) + ".", hidden_, c.moeIntermediateSize,
                          Activation::Silu);
  if (onDevice) {
    std::vector<const Linear*> gates, ups, downs;
    for (const GatedMlp& e : experts_) gates.push_back(&e.gate()), ups.push_back(&e.up()), downs.push_back(&e.down());
    onDevice_ = ops::DeviceExperts(gates, ups, downs);
  }
  shared_ = GatedMlp(weights, prefix + "shared_expert.", hidden_, c.sharedExpertIntermediateSize, Activation::Silu);
  sharedGate_ = Linear(weights, prefix + "shared_expert_gate.weight", 1, hidden_);
}

void MoeMlp::forward(const Tensor& x, const Tensor& out) const {
  const int64_t rows = x.size(0), experts = static_cast<int64_t>(experts_.size());
  const Tensor scores = ops::emptyLike({rows, experts}, x);
  router_.apply(x, scores);
  if (onDevice_.usable() && x.onGpu()) {
    onDevice_.forward(x, scores, topK_, out);
  } else {
    // In host memory (or experts the device's kernels cannot choose among): the routes read here
    // steer a loop over the experts.
    const ops::Routes routes = ops::routeTopK(scores, topK_);
    ops::zero(out);
    for (int64_t e = 0; e < experts; ++e) {
      const std::vector<int64_t>& mine = routes.rows[static_cast<size_t>(e)];
      if (mine.empty()) continue;
      const Tensor in = ops::gatherRows(x, mine);
      const Tensor y = ops::emptyLike({static_cast<int64_t>(mine.size()), hidden_}, x);
      experts_[static_cast<size_t>(e)].forward(in, y);
      ops::addWeightedRows(out, mine, routes.weights[static_cast<size_t>(e)], y);
    }
  }
  const Tensor shared = ops::emptyLike({rows, hidden_}, x), gate = ops::emptyLike({rows, 1}, x);
  shared_.forward(x, shared);
  sharedGate_.apply(x, gate);
  ops::addGatedRows(out, shared, gate);
}

}  // namespace gizml::llm
