#include "llm/models/layers.h"

#include <gizml/error.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>

#include "core/thread_pool.h"
#include "cpu/elementwise.h"
#include "llm/models/cached_attention.h"
#include "llm/models/weights.h"
#include "llm/quant/converted_model.h"

namespace gizml::llm {
namespace {

// The steps between a layer's matrix products (norms, RoPE, the MLP's activation, residual
// adds) on every thread for a prefill's rows: on the caller alone they were time the other
// thread waited (with attention's split, 8 % of a Qwen3-shaped 2-thread prefill). `rows` items
// of `width` floats each; a decode step's few rows stay on the calling thread. Each item is
// computed as alone, so the bits do not depend on the split.
void forEachRow(int64_t rows, int64_t width, const std::function<void(int64_t, int64_t)>& body) {
  constexpr int64_t kFloatsPerPart = 16384;
  core::parallelFor(rows, std::max<int64_t>(1, kFloatsPerPart / std::max<int64_t>(1, width)), body);
}

// A layer's intermediate rows, in buffers of the calling thread kept from layer to layer and
// step to step (one per use: a layer's forward is never nested in another's). Fresh zeroed
// vectors cost a 512-row prefill a memset and page faults of about 24 MB a layer on the calling
// thread alone, while the other thread waited (5 % of a Qwen3-shaped prefill's samples). The
// cost: they keep the size of the largest pass (about 50 KB a prompt row on Qwen3-0.6B).
enum class Scratch { Query, Key, Value, Context, QueryAndGate, Gate, MlpGate, MlpUp, Count };

float* scratch(Scratch use, int64_t floats) {
  thread_local std::vector<float> buffers[static_cast<int>(Scratch::Count)];
  std::vector<float>& b = buffers[static_cast<int>(use)];
  if (static_cast<int64_t>(b.size()) < floats) b.resize(static_cast<size_t>(floats));
  return b.data();
}

}  // namespace

void addInPlace(float* x, const float* y, int64_t n) {
  forEachRow(n, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) x[i] += y[i];
  });
}

RmsNorm::RmsNorm(const ConvertedModel& weights, const std::string& name, int64_t dim, double eps, bool onePlus)
    : weight_(loadVector(weights, name, dim)), eps_(static_cast<float>(eps)) {
  if (onePlus)
    for (float& w : weight_) w += 1.0f;
}

void RmsNorm::apply(const float* x, int64_t rows, float* out) const {
  const auto dim = static_cast<int64_t>(weight_.size());
  forEachRow(rows, dim, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* in = x + r * dim;
      float sum = 0.0f;
      for (int64_t i = 0; i < dim; ++i) sum += in[i] * in[i];
      const float inv = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps_);
      for (int64_t i = 0; i < dim; ++i) out[r * dim + i] = in[i] * inv * weight_[static_cast<size_t>(i)];
    }
  });
}

Rope::Rope(int64_t headDim, double partialFactor, double theta, const RopeScaling& scaling) : headDim_(headDim) {
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
    invFreq_.push_back(static_cast<float>(f));
  }
}

void Rope::apply(float* x, int64_t heads, int64_t position) const {
  const auto half = static_cast<int64_t>(invFreq_.size());
  for (int64_t i = 0; i < half; ++i) {
    // The angle in f32, as transformers computes it; its cos and sin rounded once.
    const float angle = static_cast<float>(position) * invFreq_[static_cast<size_t>(i)];
    const auto c = static_cast<float>(std::cos(static_cast<double>(angle)));
    const auto s = static_cast<float>(std::sin(static_cast<double>(angle)));
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + h * headDim_;
      const float a = v[i], b = v[i + half];
      v[i] = a * c - b * s;
      v[i + half] = b * c + a * s;
    }
  }
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
      rope_(std::move(rope)) {
  if (qkNorm) {
    qNorm_ = RmsNorm(weights, prefix + "q_norm.weight", shape.headDim, eps, onePlusNorm);
    kNorm_ = RmsNorm(weights, prefix + "k_norm.weight", shape.headDim, eps, onePlusNorm);
  }
}

void Attention::forward(const float* x, const Batch& batch, int64_t layer, float* out) const {
  const AttentionShape& s = shape_;
  const int64_t rows = batch.rows, qWidth = s.heads * s.headDim, kvWidth = s.kvHeads * s.headDim;
  // Every value of these is written before it is read.
  float* q = scratch(Scratch::Query, rows * qWidth);
  float* k = scratch(Scratch::Key, rows * kvWidth);
  float* v = scratch(Scratch::Value, rows * kvWidth);
  float* context = scratch(Scratch::Context, rows * qWidth);
  float* gate = nullptr;
  if (outputGate_) {
    // Each head's [query | gate] halves, apart.
    float* both = scratch(Scratch::QueryAndGate, rows * qWidth * 2);
    Linear::applyAll({&q_, &k_, &v_}, x, rows, {both, k, v});
    gate = scratch(Scratch::Gate, rows * qWidth);
    for (int64_t h = 0; h < rows * s.heads; ++h) {
      const float* from = both + h * 2 * s.headDim;
      std::copy(from, from + s.headDim, q + h * s.headDim);
      std::copy(from + s.headDim, from + 2 * s.headDim, gate + h * s.headDim);
    }
  } else {
    Linear::applyAll({&q_, &k_, &v_}, x, rows, {q, k, v});
  }
  if (!qNorm_.empty()) {
    qNorm_.apply(q, rows * s.heads, q);
    kNorm_.apply(k, rows * s.kvHeads, k);
  }
  for (const Batch::Sequence& seq : batch.sequences) {
    forEachRow(seq.rows, qWidth + kvWidth, [&](int64_t r0, int64_t r1) {
      for (int64_t row = seq.first + r0; row < seq.first + r1; ++row) {
        const int64_t position = seq.start + row - seq.first;
        rope_.apply(q + row * qWidth, s.heads, position);
        rope_.apply(k + row * kvWidth, s.kvHeads, position);
      }
    });
    // On this thread: a layer's first store allocates its rows.
    for (int64_t row = seq.first; row < seq.first + seq.rows; ++row)
      seq.cache->store(layer, seq.start + row - seq.first, k + row * kvWidth, v + row * kvWidth);
  }

  // Every sequence's rows, a prefill's or a decode step's, through the one blocked path: a row's
  // context does not depend on the rows beside it.
  std::vector<AttentionRun> runs;
  for (const Batch::Sequence& seq : batch.sequences)
    runs.push_back({seq.cache, seq.start, seq.rows, q + seq.first * qWidth, context + seq.first * qWidth});
  cachedAttention(runs, layer, s);
  if (gate != nullptr)
    for (int64_t i = 0; i < rows * qWidth; ++i) context[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
  o_.apply(context, rows, out);
}

GatedMlp::GatedMlp(const ConvertedModel& weights, const std::string& prefix, int64_t hidden, int64_t inner,
                   Activation act)
    : gate_(weights, prefix + "gate_proj.weight", inner, hidden),
      up_(weights, prefix + "up_proj.weight", inner, hidden),
      down_(weights, prefix + "down_proj.weight", hidden, inner),
      act_(act) {}

void GatedMlp::forward(const float* x, int64_t rows, float* out) const {
  const int64_t n = rows * gate_.out();
  float* gate = scratch(Scratch::MlpGate, n);  // written whole before it is read, as up
  float* up = scratch(Scratch::MlpUp, n);
  Linear::applyAll({&gate_, &up_}, x, rows, {gate, up});
  // The activation and the product with up through the vectorised elementwise kernels.
  forEachRow(n, 1, [&](int64_t i0, int64_t i1) {
    cpu::unaryF32(act_ == Activation::Silu ? tensor::UnaryOp::Silu : tensor::UnaryOp::GeluTanh, gate + i0, gate + i0,
                  i1 - i0);
    cpu::binaryF32(tensor::BinaryOp::Mul, gate + i0, up + i0, gate + i0, i1 - i0);
  });
  down_.apply(gate, rows, out);
}

}  // namespace gizml::llm
