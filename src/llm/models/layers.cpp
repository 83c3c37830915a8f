#include "llm/models/layers.h"

#include <gizml/error.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "llm/ops/scratch.h"
#include "llm/ops/weights.h"
#include "llm/quant/converted_model.h"

namespace gizml::llm {

using ops::Scratch;
using ops::scratch;

RmsNorm::RmsNorm(const ConvertedModel& weights, const std::string& name, int64_t dim, double eps, bool onePlus)
    : eps_(static_cast<float>(eps)) {
  std::vector<float> w = loadVector(weights, name, dim);
  if (onePlus)
    for (float& v : w) v += 1.0f;
  weight_ = placedValues(weights, w);
}

Rope::Rope(int64_t headDim, double partialFactor, double theta, const RopeScaling& scaling) : headDim_(headDim) {
  std::vector<float> invFreq;
  const auto dim = static_cast<int64_t>(static_cast<double>(headDim) * partialFactor);
  for (int64_t i = 0; i < dim / 2; ++i) {
    double f = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(dim));
    if (scaling.type == "linear") {
      f /= scaling.factor;
    } else if (scaling.type == "llama3") {
      // Llama 3: long wavelengths slow down by the factor, short ones stay, those between blend.
      const double old = static_cast<double>(scaling.originalMaxPositions);
      const double wavelength = 2 * std::numbers::pi / f;
      if (wavelength > old / scaling.lowFreqFactor) {
        f /= scaling.factor;
      } else if (wavelength >= old / scaling.highFreqFactor) {
        const double smooth = (old / wavelength - scaling.lowFreqFactor) / (scaling.highFreqFactor - scaling.lowFreqFactor);
        f = (1 - smooth) * f / scaling.factor + smooth * f;
      }
    } else {
      check(scaling.type == "default", "RoPE scaling '" + scaling.type + "' is not supported yet");
    }
    invFreq.push_back(static_cast<float>(f));
  }
  invFreq_ = valuesTensor(invFreq);
}

Rope Rope::placedLike(const ConvertedModel& weights) const {
  Rope placed = *this;
  if (invFreq_.ndim() > 0) placed.invFreq_ = placedValues(weights, invFreq_.toFloats());
  placed.gpu_ = weights.gpu();
  return placed;
}

void Rope::apply(const Tensor& q, int64_t qHeads, const Tensor& k, int64_t kHeads, const Batch& batch) const {
  // On a GPU, every row of a pass turns in one launch at positions read from device memory (one
  // copy a pass), so that a decode step's launches are the same at each step (StepGraph); on the
  // CPU each sequence's from its start (its table of angles), or at its pictures' positions.
  if (!gpu_) {
    for (const Batch::Sequence& seq : batch.sequences) {
      const Tensor queries = rowsOf(q, seq.first, seq.rows), keys = rowsOf(k, seq.first, seq.rows);
      const int64_t start = seq.start + seq.cache->positionShift();
      const Tensor& at = seq.ropePositions;
      ops::rope(queries, qHeads, keys, kHeads, headDim_, invFreq_, start, at.ndim() > 0 ? &at : nullptr);
    }
    return;
  }
  // A position a row, or one a pair of every row where a sequence has pictures.
  const bool pictures = std::any_of(batch.sequences.begin(), batch.sequences.end(),
                                    [](const Batch::Sequence& seq) { return seq.ropePositions.ndim() > 0; });
  const int64_t n = pictures ? pairs() : 1;
  Tensor positions = pictures ? tensor::empty({batch.rows, n}, DType::I32) : tensor::empty({batch.rows}, DType::I32);
  int32_t* p = positions.data<int32_t>();
  for (const Batch::Sequence& seq : batch.sequences) {
    if (seq.ropePositions.ndim() > 0) {
      std::copy_n(seq.ropePositions.data<int32_t>(), seq.rows * n, p + seq.first * n);
      continue;
    }
    const int64_t start = seq.start + seq.cache->positionShift();
    for (int64_t r = 0; r < seq.rows; ++r) std::fill_n(p + (seq.first + r) * n, n, static_cast<int32_t>(start + r));
  }
  ops::rope(q, qHeads, k, kHeads, headDim_, invFreq_, 0, &positions);
}

Tensor multimodalRopePositions(const ModelConfig& config, int64_t pairs,
                               const std::vector<std::array<int64_t, 3>>& positions) {
  const std::vector<int64_t>& section = config.mropeSection;
  check(section.size() == 3, "pictures: the model's RoPE is not multimodal (no mrope_section of time, height and width)");
  // The component that turns each pair.
  std::vector<int> axis(static_cast<size_t>(pairs), 0);
  for (int64_t i = 0; i < pairs; ++i) {
    if (config.mropeInterleaved) {
      for (int a = 1; a < 3; ++a)
        if (i % 3 == a && i < 3 * section[static_cast<size_t>(a)]) axis[static_cast<size_t>(i)] = a;
    } else {
      axis[static_cast<size_t>(i)] = i < section[0] ? 0 : i < section[0] + section[1] ? 1 : 2;
    }
  }
  const auto rows = static_cast<int64_t>(positions.size());
  Tensor out = tensor::empty({rows, pairs}, DType::I32);
  int32_t* o = out.data<int32_t>();
  for (const std::array<int64_t, 3>& p : positions)
    for (int64_t i = 0; i < pairs; ++i) *o++ = static_cast<int32_t>(p[static_cast<size_t>(axis[static_cast<size_t>(i)])]);
  return out;
}

Attention::Attention(const ConvertedModel& weights, const std::string& prefix, const AttentionShape& shape, bool bias,
                     bool qkNorm, bool onePlusNorm, double eps, Rope rope, bool outputGate)
    : shape_(shape),
      outputGate_(outputGate),
      q_(weights, prefix + "q_proj.weight", shape.heads * shape.headDim * (outputGate ? 2 : 1), shape.hidden,
         bias ? prefix + "q_proj.bias" : ""),
      k_(weights, prefix + "k_proj.weight", shape.kvHeads * shape.headDim, shape.hidden,
         bias ? prefix + "k_proj.bias" : ""),
      v_(weights, prefix + "v_proj.weight", shape.kvHeads * shape.headDim, shape.hidden,
         bias ? prefix + "v_proj.bias" : ""),
      o_(weights, prefix + "o_proj.weight", shape.hidden, shape.heads * shape.headDim),
      rope_(rope.placedLike(weights)) {
  if (qkNorm) {
    qNorm_ = RmsNorm(weights, prefix + "q_norm.weight", shape.headDim, eps, onePlusNorm);
    kNorm_ = RmsNorm(weights, prefix + "k_norm.weight", shape.headDim, eps, onePlusNorm);
  }
}

void Attention::forward(const Tensor& x, const Batch& batch, int64_t layer, const Tensor& out) const {
  const AttentionShape& s = shape_;
  const int64_t rows = batch.rows, qWidth = s.heads * s.headDim, kvWidth = s.kvHeads * s.headDim;
  // Every value of these is written before it is read.
  const Tensor q = scratch(Scratch::Query, rows, qWidth, x);
  const Tensor k = scratch(Scratch::Key, rows, kvWidth, x);
  const Tensor v = scratch(Scratch::Value, rows, kvWidth, x);
  const Tensor context = scratch(Scratch::Context, rows, qWidth, x);
  Tensor gate;
  if (outputGate_) {
    // Each head's [query | gate] halves, apart.
    const Tensor both = scratch(Scratch::QueryAndGate, rows, qWidth * 2, x);
    Linear::applyAll({&q_, &k_, &v_}, x, {both, k, v});
    gate = scratch(Scratch::Gate, rows, qWidth, x);
    ops::splitRuns(both, s.headDim, q, gate);
  } else {
    Linear::applyAll({&q_, &k_, &v_}, x, {q, k, v});
  }
  if (!qNorm_.empty()) {
    qNorm_.apply(q, q);
    kNorm_.apply(k, k);
  }
  // The keys turned, then stored by the attention (a decode step's by the tasks that read them:
  // a job a layer fewer).
  rope_.apply(q, s.heads, k, s.kvHeads, batch);
  std::vector<ops::AttentionRun> runs;
  for (const Batch::Sequence& seq : batch.sequences)
    runs.push_back({seq.cache, seq.start, rowsOf(q, seq.first, seq.rows), rowsOf(context, seq.first, seq.rows),
                    seq.keyEnd, rowsOf(k, seq.first, seq.rows), rowsOf(v, seq.first, seq.rows)});
  ops::cachedAttention(runs, layer, s);
  if (outputGate_) ops::sigmoidGate(context, gate);
  o_.apply(context, out);
}

GatedMlp::GatedMlp(const ConvertedModel& weights, const std::string& prefix, int64_t hidden, int64_t inner,
                   Activation act)
    : gate_(weights, prefix + "gate_proj.weight", inner, hidden),
      up_(weights, prefix + "up_proj.weight", inner, hidden),
      down_(weights, prefix + "down_proj.weight", hidden, inner),
      act_(act) {}

void GatedMlp::forward(const Tensor& x, const Tensor& out) const {
  const int64_t rows = x.size(0);
  const Tensor gate = scratch(Scratch::MlpGate, rows, gate_.out(), x);  // written whole before it is read, as up
  const Tensor up = scratch(Scratch::MlpUp, rows, up_.out(), x);
  Linear::applyAll({&gate_, &up_}, x, {gate, up});
  ops::gatedActivation(gate, up, act_);
  down_.apply(gate, out);
}

}  // namespace gizml::llm
