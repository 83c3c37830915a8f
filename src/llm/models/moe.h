#pragma once
// A sparse mixture-of-experts MLP (Qwen 3.5 MoE): a router scores the experts of each token
// (softmax in f32), keeps the top k and renormalises their weights; each expert is a SwiGLU MLP
// run only on the tokens routed to it; a shared expert, scaled by sigmoid(shared_expert_gate(x)),
// sees every token.
#include <cstdint>
#include <string>
#include <vector>

#include "llm/model_config.h"
#include "llm/models/layers.h"
#include "llm/ops/moe.h"

namespace gizml::llm {

class MoeMlp {
 public:
  MoeMlp() = default;
  /// gate (the router), experts.N.{gate,up,down}_proj, shared_expert.*, shared_expert_gate under
  /// `prefix` ("model.layers.3.mlp."). onDevice: on a GPU the experts are chosen there
  /// (ModelOptions::expertsOnDevice).
  MoeMlp(const ConvertedModel& weights, const std::string& prefix, const ModelConfig& config, bool onDevice);
  void forward(const Tensor& x, const Tensor& out) const;

 private:
  int64_t hidden_ = 0, topK_ = 0;
  Linear router_, sharedGate_;
  std::vector<GatedMlp> experts_;
  ops::DeviceExperts onDevice_;  // the experts where their routing stays on the GPU, when it can
  GatedMlp shared_;
};

}  // namespace gizml::llm
