#include "llm/models/gated_delta_net.h"

#include <gizml/error.h>

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "llm/models/weights.h"
#include "llm/quant/converted_model.h"

namespace gizml::llm {
namespace {

// transformers' chunk length: the chunked and the recurrent forms agree to rounding at any length.
constexpr int64_t kChunk = 64;

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// torch's softplus: x itself above 20, where log1p(exp(x)) rounds to x anyway.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

/// v *= scale / sqrt(|v|^2 + 1e-6) (the FLA library's l2norm, as transformers).
void l2normalize(float* v, int64_t n, float scale) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += v[i] * v[i];
  const float f = scale / std::sqrt(sum + 1e-6f);
  for (int64_t i = 0; i < n; ++i) v[i] *= f;
}

float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

/// y[dv] (+)= x[dk] S, S [dk, dv] row-major.
void timesState(const float* x, const float* s, int64_t dk, int64_t dv, float* y) {
  for (int64_t i = 0; i < dk; ++i)
    for (int64_t j = 0; j < dv; ++j) y[j] += x[i] * s[i * dv + j];
}

}  // namespace

HybridState::HybridState(const void* owner, const ModelConfig& c, int64_t capacity, DType kvCache)
    : KvCache(owner, c.numLayers + c.mtpLayers, c.numKvHeads, c.headDim, capacity, kvCache), deltaNets_(static_cast<size_t>(c.numLayers)) {
  const int64_t channels = 2 * c.linearNumKeyHeads * c.linearKeyHeadDim + c.linearNumValueHeads * c.linearValueHeadDim;
  for (int64_t i = 0; i < c.numLayers; ++i)
    if (c.layerTypes[static_cast<size_t>(i)] == LayerType::LinearAttention) {
      DeltaNetState& s = deltaNets_[static_cast<size_t>(i)];
      s.conv.assign(static_cast<size_t>((c.linearConvKernel - 1) * channels), 0.0f);
      s.memory.assign(static_cast<size_t>(c.linearNumValueHeads * c.linearKeyHeadDim * c.linearValueHeadDim), 0.0f);
    }
}

void HybridState::keep(int64_t layer, int64_t length) {
  auto it = std::find_if(kept_.begin(), kept_.end(), [&](const Kept& k) { return k.length >= length; });
  if (it == kept_.end() || it->length != length)
    it = kept_.insert(it, {length, std::vector<DeltaNetState>(deltaNets_.size())});
  it->layers[static_cast<size_t>(layer)] = deltaNets_[static_cast<size_t>(layer)];
  if (kept_.size() > kMaxKept) kept_.erase(kept_.begin());
}

int64_t HybridState::reusable(int64_t n) const {
  if (n >= length()) return length();
  int64_t best = 0;
  for (const Kept& k : kept_)
    if (k.length <= n) best = k.length;
  return best;
}

void HybridState::forgetKept(int64_t length) {
  kept_.erase(std::find_if(kept_.begin(), kept_.end(), [&](const Kept& k) { return k.length > length; }), kept_.end());
}

void HybridState::keepRow(int64_t position, int32_t token, const float* hidden, int64_t width) {
  const auto need = static_cast<size_t>(position + 1);
  if (tokens_.size() < need) tokens_.resize(need), hidden_.resize(need * static_cast<size_t>(width));
  tokens_[static_cast<size_t>(position)] = token;
  std::copy(hidden, hidden + width, hidden_.begin() + position * width);
}

void HybridState::truncate(int64_t n) {
  if (n != length()) {
    // The MTP entry of position n - 1 read the token at n, which may change now.
    mtpNext = std::min(mtpNext, std::max<int64_t>(0, n - 1));
    const auto it = std::find_if(kept_.begin(), kept_.end(), [&](const Kept& k) { return k.length == n; });
    check(n == 0 || it != kept_.end(), "truncate: recurrent states are kept after token " + std::to_string(length()) +
                                           " and at the marks fed, so they cannot go back to " + std::to_string(n));
    for (size_t i = 0; i < deltaNets_.size(); ++i) {
      DeltaNetState& s = deltaNets_[i];
      if (n == 0) {
        std::fill(s.conv.begin(), s.conv.end(), 0.0f);
        std::fill(s.memory.begin(), s.memory.end(), 0.0f);
      } else {
        s = it->layers[i];
      }
    }
    forgetKept(n);
  }
  KvCache::truncate(n);
}

GatedDeltaNet::GatedDeltaNet(const ConvertedModel& weights, const std::string& prefix, const ModelConfig& c)
    : hidden_(c.hiddenSize),
      keyHeads_(c.linearNumKeyHeads),
      valueHeads_(c.linearNumValueHeads),
      keyDim_(c.linearKeyHeadDim),
      valueDim_(c.linearValueHeadDim),
      kernel_(c.linearConvKernel),
      eps_(static_cast<float>(c.rmsNormEps)) {
  const std::string where = weights.folder() + ": ";
  check(keyHeads_ > 0 && valueHeads_ > 0 && keyDim_ > 0 && valueDim_ > 0 && kernel_ > 0,
        where + "linear attention sizes must be positive");
  check(valueHeads_ % keyHeads_ == 0, where + "linear_num_key_heads (" + std::to_string(keyHeads_) +
                                          ") must divide linear_num_value_heads (" + std::to_string(valueHeads_) + ")");
  const int64_t keyWidth = keyHeads_ * keyDim_, valueWidth = valueHeads_ * valueDim_;
  const int64_t channels = 2 * keyWidth + valueWidth;
  qkv_ = Linear(weights, prefix + "in_proj_qkv.weight", channels, hidden_);
  z_ = Linear(weights, prefix + "in_proj_z.weight", valueWidth, hidden_);
  b_ = Linear(weights, prefix + "in_proj_b.weight", valueHeads_, hidden_);
  a_ = Linear(weights, prefix + "in_proj_a.weight", valueHeads_, hidden_);
  out_ = Linear(weights, prefix + "out_proj.weight", hidden_, valueWidth);
  storedTensor(weights, prefix + "conv1d.weight", {channels, 1, kernel_});
  conv_ = weights.dequantize(prefix + "conv1d.weight").toFloats();
  for (float aLog : loadVector(weights, prefix + "A_log", valueHeads_)) decayRate_.push_back(-std::exp(aLog));
  dtBias_ = loadVector(weights, prefix + "dt_bias", valueHeads_);
  norm_ = loadVector(weights, prefix + "norm.weight", valueDim_);
}

void GatedDeltaNet::forward(const float* x, const Batch& batch, int64_t layer, float* out) const {
  const int64_t rows = batch.rows, channels = qkv_.out(), valueWidth = valueHeads_ * valueDim_;
  std::vector<float> qkv(static_cast<size_t>(rows * channels)), z(static_cast<size_t>(rows * valueWidth)),
      b(static_cast<size_t>(rows * valueHeads_)), a(static_cast<size_t>(rows * valueHeads_)),
      o(static_cast<size_t>(rows * valueWidth));
  qkv_.apply(x, rows, qkv.data());
  z_.apply(x, rows, z.data());
  b_.apply(x, rows, b.data());
  a_.apply(x, rows, a.data());
  for (const Batch::Sequence& seq : batch.sequences)
    mixSequence(qkv.data() + seq.first * channels, b.data() + seq.first * valueHeads_,
                a.data() + seq.first * valueHeads_, seq, layer, o.data() + seq.first * valueWidth);
  // The gated norm of each value head: rmsnorm(o) w silu(z).
  for (int64_t h = 0; h < rows * valueHeads_; ++h) {
    float* v = o.data() + h * valueDim_;
    const float* gate = z.data() + h * valueDim_;
    const float inv = 1.0f / std::sqrt(dot(v, v, valueDim_) / static_cast<float>(valueDim_) + eps_);
    for (int64_t i = 0; i < valueDim_; ++i) v[i] = v[i] * inv * norm_[static_cast<size_t>(i)] * gate[i] * sigmoid(gate[i]);
  }
  out_.apply(o.data(), rows, out);
}

void GatedDeltaNet::mixSequence(const float* qkv, const float* b, const float* a, const Batch::Sequence& seq,
                                int64_t layer, float* o) const {
  // The model made every state it is fed (plan checks), so each is a HybridState.
  auto& hybrid = static_cast<HybridState&>(*seq.cache);
  DeltaNetState& state = hybrid.deltaNet(layer);
  const int64_t channels = qkv_.out(), valueWidth = valueHeads_ * valueDim_;
  int64_t done = 0;
  for (int64_t mark : seq.marks) {
    const int64_t rows = mark - seq.start - done;
    mix(qkv + done * channels, b + done * valueHeads_, a + done * valueHeads_, rows, state, o + done * valueWidth);
    done += rows;
    hybrid.keep(layer, mark);
  }
  if (done < seq.rows)
    mix(qkv + done * channels, b + done * valueHeads_, a + done * valueHeads_, seq.rows - done, state,
        o + done * valueWidth);
}

void GatedDeltaNet::mix(const float* qkv, const float* b, const float* a, int64_t rows, DeltaNetState& state,
                        float* o) const {
  const int64_t channels = qkv_.out(), keyWidth = keyHeads_ * keyDim_, valueWidth = valueHeads_ * valueDim_;
  const int64_t held = kernel_ - 1;
  // The causal depthwise conv reads the held inputs, then these rows.
  std::vector<float> window(static_cast<size_t>((held + rows) * channels));
  std::copy(state.conv.begin(), state.conv.end(), window.begin());
  std::copy(qkv, qkv + rows * channels, window.begin() + held * channels);
  std::vector<float> q(static_cast<size_t>(rows * keyWidth)), k(q.size()), v(static_cast<size_t>(rows * valueWidth));
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t c = 0; c < channels; ++c) {
      float s = 0.0f;
      for (int64_t j = 0; j < kernel_; ++j) s += conv_[static_cast<size_t>(c * kernel_ + j)] * window[static_cast<size_t>((t + j) * channels + c)];
      s *= sigmoid(s);
      if (c < keyWidth) q[static_cast<size_t>(t * keyWidth + c)] = s;
      else if (c < 2 * keyWidth) k[static_cast<size_t>(t * keyWidth + c - keyWidth)] = s;
      else v[static_cast<size_t>(t * valueWidth + c - 2 * keyWidth)] = s;
    }
  std::copy(window.end() - held * channels, window.end(), state.conv.begin());

  const float queryScale = 1.0f / std::sqrt(static_cast<float>(keyDim_));
  for (int64_t h = 0; h < rows * keyHeads_; ++h) {
    l2normalize(q.data() + h * keyDim_, keyDim_, queryScale);
    l2normalize(k.data() + h * keyDim_, keyDim_, 1.0f);
  }
  std::vector<float> beta(static_cast<size_t>(rows * valueHeads_)), g(beta.size());
  for (int64_t i = 0; i < rows * valueHeads_; ++i) {
    const int64_t h = i % valueHeads_;
    beta[static_cast<size_t>(i)] = sigmoid(b[i]);
    g[static_cast<size_t>(i)] = decayRate_[static_cast<size_t>(h)] * softplus(a[i] + dtBias_[static_cast<size_t>(h)]);
  }
  if (rows == 1)
    recurrent(q.data(), k.data(), v.data(), beta.data(), g.data(), rows, state, o);
  else
    chunked(q.data(), k.data(), v.data(), beta.data(), g.data(), rows, state, o);
}

void GatedDeltaNet::recurrent(float* q, float* k, const float* v, const float* beta, const float* g, int64_t rows,
                              DeltaNetState& state, float* o) const {
  const int64_t dk = keyDim_, dv = valueDim_, perKey = valueHeads_ / keyHeads_;
  core::parallelFor(valueHeads_, 1, [&](int64_t h0, int64_t h1) {
    std::vector<float> delta(static_cast<size_t>(dv));
    for (int64_t h = h0; h < h1; ++h) {
      float* s = state.memory.data() + h * dk * dv;
      for (int64_t t = 0; t < rows; ++t) {
        const float* qt = q + (t * keyHeads_ + h / perKey) * dk;
        const float* kt = k + (t * keyHeads_ + h / perKey) * dk;
        const float* vt = v + (t * valueHeads_ + h) * dv;
        const float decay = std::exp(g[t * valueHeads_ + h]), b = beta[t * valueHeads_ + h];
        for (int64_t i = 0; i < dk * dv; ++i) s[i] *= decay;
        std::fill(delta.begin(), delta.end(), 0.0f);
        timesState(kt, s, dk, dv, delta.data());  // S^T k
        for (int64_t j = 0; j < dv; ++j) delta[static_cast<size_t>(j)] = (vt[j] - delta[static_cast<size_t>(j)]) * b;
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t j = 0; j < dv; ++j) s[i * dv + j] += kt[i] * delta[static_cast<size_t>(j)];
        float* ot = o + (t * valueHeads_ + h) * dv;
        std::fill(ot, ot + dv, 0.0f);
        timesState(qt, s, dk, dv, ot);
      }
    }
  });
}

// Within a chunk of L tokens, with c the cumulative log decay and A[i][j] = (beta_i k_i . k_j)
// e^(c_i - c_j) for j < i, the rule's updates condense to (I + A) U = beta v and
// (I + A) W = beta k e^c (forward substitution); then, from the state S before the chunk,
//   v'_i = U_i - W_i S,   o_i = e^(c_i) q_i S + sum_{j <= i} (q_i . k_j) e^(c_i - c_j) v'_j,
//   S <- e^(c_last) S + sum_i e^(c_last - c_i) k_i v'_i^T.
void GatedDeltaNet::chunked(float* q, float* k, const float* v, const float* beta, const float* g, int64_t rows,
                            DeltaNetState& state, float* o) const {
  const int64_t dk = keyDim_, dv = valueDim_, perKey = valueHeads_ / keyHeads_;
  core::parallelFor(valueHeads_, 1, [&](int64_t h0, int64_t h1) {
    std::vector<float> c(kChunk), A(kChunk * kChunk), U(kChunk * dv), W(kChunk * dk), vNew(kChunk * dv);
    for (int64_t h = h0; h < h1; ++h) {
      float* s = state.memory.data() + h * dk * dv;
      auto qAt = [&](int64_t t) { return q + (t * keyHeads_ + h / perKey) * dk; };
      auto kAt = [&](int64_t t) { return k + (t * keyHeads_ + h / perKey) * dk; };
      for (int64_t c0 = 0; c0 < rows; c0 += kChunk) {
        const int64_t L = std::min(kChunk, rows - c0);
        float sum = 0.0f;
        for (int64_t i = 0; i < L; ++i) c[static_cast<size_t>(i)] = sum += g[(c0 + i) * valueHeads_ + h];
        for (int64_t i = 0; i < L; ++i) {
          const float bi = beta[(c0 + i) * valueHeads_ + h];
          for (int64_t j = 0; j < i; ++j)
            A[static_cast<size_t>(i * kChunk + j)] =
                bi * dot(kAt(c0 + i), kAt(c0 + j), dk) * std::exp(c[static_cast<size_t>(i)] - c[static_cast<size_t>(j)]);
          // Row i of U and W from the rows before it.
          float* u = U.data() + i * dv;
          float* w = W.data() + i * dk;
          const float* vi = v + ((c0 + i) * valueHeads_ + h) * dv;
          const float* ki = kAt(c0 + i);
          const float growth = std::exp(c[static_cast<size_t>(i)]);
          for (int64_t p = 0; p < dv; ++p) u[p] = bi * vi[p];
          for (int64_t p = 0; p < dk; ++p) w[p] = bi * ki[p] * growth;
          for (int64_t j = 0; j < i; ++j) {
            const float aij = A[static_cast<size_t>(i * kChunk + j)];
            for (int64_t p = 0; p < dv; ++p) u[p] -= aij * U[static_cast<size_t>(j * dv + p)];
            for (int64_t p = 0; p < dk; ++p) w[p] -= aij * W[static_cast<size_t>(j * dk + p)];
          }
        }
        for (int64_t i = 0; i < L; ++i) {
          float* vi = vNew.data() + i * dv;
          std::copy(U.begin() + i * dv, U.begin() + (i + 1) * dv, vi);
          for (int64_t p = 0; p < dk; ++p)
            for (int64_t j = 0; j < dv; ++j) vi[j] -= W[static_cast<size_t>(i * dk + p)] * s[p * dv + j];
        }
        for (int64_t i = 0; i < L; ++i) {
          float* oi = o + ((c0 + i) * valueHeads_ + h) * dv;
          const float* qi = qAt(c0 + i);
          std::fill(oi, oi + dv, 0.0f);
          timesState(qi, s, dk, dv, oi);
          const float growth = std::exp(c[static_cast<size_t>(i)]);
          for (int64_t j = 0; j < dv; ++j) oi[j] *= growth;
          for (int64_t j = 0; j <= i; ++j) {
            const float w = dot(qi, kAt(c0 + j), dk) * std::exp(c[static_cast<size_t>(i)] - c[static_cast<size_t>(j)]);
            for (int64_t p = 0; p < dv; ++p) oi[p] += w * vNew[static_cast<size_t>(j * dv + p)];
          }
        }
        const float last = c[static_cast<size_t>(L - 1)];
        const float chunkDecay = std::exp(last);
        for (int64_t i = 0; i < dk * dv; ++i) s[i] *= chunkDecay;
        for (int64_t t = 0; t < L; ++t) {
          const float* kt = kAt(c0 + t);
          const float f = std::exp(last - c[static_cast<size_t>(t)]);
          for (int64_t i = 0; i < dk; ++i)
            for (int64_t j = 0; j < dv; ++j) s[i * dv + j] += f * kt[i] * vNew[static_cast<size_t>(t * dv + j)];
        }
      }
    }
  });
}

}  // namespace gizml::llm
