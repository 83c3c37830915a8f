#pragma once
// The pieces our architectures are built from: RMS norms, rotary embeddings, attention with
// grouped KV heads over a KV cache, gated MLPs, written in the device operations of llm/ops/.
// Activations are F32 row tensors [rows, width]; the rows of one pass are the tokens of every fed
// sequence, one after another (Batch).
#include <gizml/tensor.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "llm/model_config.h"
#include "llm/ops/attention.h"
#include "llm/ops/kv_cache.h"
#include "llm/ops/linear.h"
#include "llm/ops/rows.h"

namespace gizml::llm {

class ConvertedModel;
using ops::Activation;
using ops::AttentionShape;
using ops::KvCache;
using ops::Linear;
using tensor::Tensor;

/// The sequences of one forward pass: sequence s owns rows [first, first + rows) and their
/// positions start, start + 1, ...
struct Batch {
  struct Sequence {
    KvCache* cache;
    int64_t first;
    int64_t rows;
    int64_t start;
    std::vector<int64_t> marks = {};  // Feed::marks
    int64_t keyEnd = 0;  // > 0: no row attends a key at or past it (ops::AttentionRun)
    /// Where the feed has pictures: I32 [rows, rotated pairs] in host memory, each row's position
    /// for each pair (multimodal RoPE). Else row r is at start + r + the cache's positionShift().
    Tensor ropePositions = {};
  };
  std::vector<Sequence> sequences;
  int64_t rows = 0;
};

/// Rows [first, first + count) of x (a view).
inline Tensor rowsOf(const Tensor& x, int64_t first, int64_t count) { return x.slice(0, first, first + count); }

/// x / rms(x) * w, or Gemma's x / rms(x) * (1 + w), over the last dim axis.
class RmsNorm {
 public:
  RmsNorm() = default;
  RmsNorm(const ConvertedModel& weights, const std::string& name, int64_t dim, double eps, bool onePlus);
  /// out = norm(x), both [rows, dim] (out may be x).
  void apply(const Tensor& x, const Tensor& out) const { ops::rmsNorm(x, weight_, eps_, out); }
  /// x += y, then out = norm(x) (on a GPU one launch).
  void addThenApply(const Tensor& x, const Tensor& y, const Tensor& out) const {
    ops::addThenRmsNorm(x, y, weight_, eps_, out);
  }
  bool empty() const { return weight_.ndim() == 0; }

 private:
  Tensor weight_;  // (1 + w) already added for Gemma
  float eps_ = 0;
};

/// Rotary position embedding, rotate-half form, on the first `partial` share of each head.
/// Frequencies from theta and a scaling (default, linear, llama3). Qwen3-VL's interleaved
/// multimodal RoPE equals this one for text, whose three position components are the same.
class Rope {
 public:
  Rope() = default;
  Rope(int64_t headDim, double partialFactor, double theta, const RopeScaling& scaling);
  /// Rotates the rows of q (qHeads heads) and k (kHeads heads) of a pass: each sequence's row r
  /// at position start + r + its cache's positionShift(), or at its ropePositions' when it has them.
  void apply(const Tensor& q, int64_t qHeads, const Tensor& k, int64_t kHeads, const Batch& batch) const;
  /// The same, its table where `weights`' layers go (ConvertedModel::gpu).
  Rope placedLike(const ConvertedModel& weights) const;
  /// Pairs rotated per head.
  int64_t pairs() const { return invFreq_.numel(); }

 private:
  int64_t headDim_ = 0;
  Tensor invFreq_;  // one per rotated pair
  std::optional<gizhw::gpu::Gpu> gpu_;  // where invFreq_ is
};

/// Multimodal RoPE's positions of a sequence's rows (Batch::Sequence::ropePositions): for each
/// row's (time, height, width) position, each of `pairs` pairs at the component that turns it,
/// as config's mrope_section lays them out (interleaved: pairs 1, 4, 7, ... height and 2, 5, 8,
/// ... width while their sections last, the rest time; else sections of consecutive pairs).
Tensor multimodalRopePositions(const ModelConfig& config, int64_t pairs,
                               const std::vector<std::array<int64_t, 3>>& positions);

/// Self-attention: q, k, v projections (with biases when the model has them), optional RMS norms
/// per head of q and k, RoPE, causal softmax attention of each query head over its KV head's
/// cache (grouped-query), output projection. With an output gate (Qwen 3.5), q_proj gives each
/// head its query and then as many gate values, and the attention output is multiplied by
/// sigmoid(gate) before o_proj.
class Attention {
 public:
  Attention() = default;
  /// Tensors under `prefix` ("model.layers.3.self_attn."): q_proj, k_proj, v_proj, o_proj, and
  /// q_norm/k_norm when qkNorm; biases of q/k/v when bias.
  Attention(const ConvertedModel& weights, const std::string& prefix, const AttentionShape& shape, bool bias,
            bool qkNorm, bool onePlusNorm, double eps, Rope rope, bool outputGate = false);
  /// out [rows, hidden] from x [rows, hidden] (normed); writes the rows' keys and values into
  /// layer `layer` of each sequence's cache first.
  void forward(const Tensor& x, const Batch& batch, int64_t layer, const Tensor& out) const;

 private:
  AttentionShape shape_{};
  bool outputGate_ = false;
  Linear q_, k_, v_, o_;
  RmsNorm qNorm_, kNorm_;
  Rope rope_;
};

/// down(act(gate(x)) * up(x)): SwiGLU (silu) or GeGLU (gelu, tanh form).
class GatedMlp {
 public:
  GatedMlp() = default;
  /// gate_proj, up_proj, down_proj under `prefix` ("model.layers.3.mlp.").
  GatedMlp(const ConvertedModel& weights, const std::string& prefix, int64_t hidden, int64_t inner, Activation act);
  void forward(const Tensor& x, const Tensor& out) const;
  const Linear& gate() const { return gate_; }
  const Linear& up() const { return up_; }
  const Linear& down() const { return down_; }

 private:
  Linear gate_, up_, down_;
  Activation act_ = Activation::Silu;
};

}  // namespace gizml::llm
