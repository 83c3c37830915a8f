#pragma once
// Qwen 3.5's linear-attention layer, Gated DeltaNet, and the per-sequence state it keeps:
//   q, k, v = silu(causal depthwise conv(in_proj_qkv(x)))      the conv keeps its last inputs
//   q, k L2-normalised (q also over sqrt(dk)); each key head serves consecutive value heads
//   beta = sigmoid(in_proj_b(x)); g = -exp(A_log) softplus(in_proj_a(x) + dt_bias)
//   per value head, S [dk, dv] in f32:  S = e^g S;  S += k (beta (v - S^T k))^T;  o = S^T q
//   out = out_proj(rmsnorm(o) w silu(in_proj_z(x)))            a norm per value head
// A token at a time that is the recurrence above; a prefill runs the same rule in chunks of 64
// (transformers' torch_chunk_gated_delta_rule), which gives the same result to rounding.
#include <cstdint>
#include <string>
#include <vector>

#include "llm/model_config.h"
#include "llm/models/layers.h"
#include "llm/ops/delta_net.h"

namespace gizml::llm {

using ops::DeltaNetState;

/// A sequence's KV cache for the attention layers and the states of its DeltaNet layers. Those
/// hold the state after the last token, and copies kept at the marks of the feeds (the ends of a
/// chat's messages), so the sequence truncates to its end, to a kept mark, or to nothing.
class HybridState final : public KvCache {
 public:
  /// The most marks kept: each costs a copy of every DeltaNet state (18 MB for Qwen3.5-0.8B), and
  /// a chat's next turn resumes at one of its last marks.
  static constexpr size_t kMaxKept = 8;

  HybridState(std::shared_ptr<ops::KvPool> pool, const ModelConfig& config, int64_t capacity);
  DeltaNetState& deltaNet(int64_t layer) { return deltaNets_[static_cast<size_t>(layer)]; }
  const DeltaNetState& deltaNet(int64_t layer) const { return deltaNets_[static_cast<size_t>(layer)]; }
  /// Keeps a copy of layer `layer`'s state as it is after `length` tokens.
  void keep(int64_t layer, int64_t length);
  void truncate(int64_t n) override;
  /// A copy of another HybridState of the same model and capacity: its keys and values (pages
  /// shared in one pool), its DeltaNet states and those kept at its marks, its MTP rows.
  bool copyFrom(const SequenceState& other) override;
  int64_t memoryBytes() const override;
  int64_t reusable(int64_t n) const override;
  void forgetKept(int64_t length) override;

  // For the MTP layers: each position's token and final hidden state, and the first position
  // whose MTP keys and values are not yet made from them (those past it came from drafts).
  /// Keeps tokens[r] and hidden row r ([rows, width]) as position start + r's.
  void keepRows(int64_t start, const std::vector<int32_t>& tokens, const Tensor& hidden);
  /// The kept hidden states of positions first .. first + rows - 1, [rows, width] (a copy).
  Tensor hiddenRows(int64_t first, int64_t rows) const;
  int32_t tokenAt(int64_t position) const { return tokens_[static_cast<size_t>(position)]; }
  int64_t mtpNext = 0;

 private:
  struct Kept {
    int64_t length;
    std::vector<DeltaNetState> layers;
  };
  std::vector<DeltaNetState> deltaNets_;  // per layer; empty for attention layers
  std::vector<Kept> kept_;                // ascending lengths
  // Row p: position p's hidden state, for the positions tokens_ holds; room for more rows, as
  // its capacity doubles when keepRows needs it to.
  Tensor hidden_;  // [rows, width] F32
  std::vector<int32_t> tokens_;
};

class GatedDeltaNet {
 public:
  GatedDeltaNet() = default;
  /// Tensors under `prefix` ("model.layers.0.linear_attn."): in_proj_qkv, in_proj_z, in_proj_b,
  /// in_proj_a, conv1d, A_log, dt_bias, norm, out_proj.
  GatedDeltaNet(const ConvertedModel& weights, const std::string& prefix, const ModelConfig& config);

  /// out [rows, hidden] from x [rows, hidden] (normed), advancing each sequence's state of
  /// layer `layer`: one fed token by the recurrence, more in chunks.
  void forward(const Tensor& x, const Batch& batch, int64_t layer, const Tensor& out) const;

 private:
  /// The mixing of the batch's rows (ops::deltaNetMix) into o [rows, valueHeads * valueDim], each
  /// sequence's in segments that end at its marks, keeping its state at each.
  void mix(const Tensor& qkv, const Tensor& b, const Tensor& a, const Batch& batch, int64_t layer,
           const Tensor& o) const;

  int64_t hidden_ = 0;
  ops::DeltaNetShape shape_{};
  Linear qkv_, z_, b_, a_, out_;
  ops::DeltaNetWeights mixing_;
  Tensor norm_;  // [valueDim]
  float eps_ = 1e-6f;
};

}  // namespace gizml::llm
