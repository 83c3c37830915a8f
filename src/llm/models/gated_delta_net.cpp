#include "llm/models/gated_delta_net.h"

#include <gizml/error.h>

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "cpu/elementwise.h"
#include "cpu/gemm.h"
#include "llm/models/gated_delta_net_kernels.h"
#include "llm/models/weights.h"
#include "llm/quant/converted_model.h"

namespace gizml::llm {
namespace {

// transformers' chunk length: the chunked and the recurrent forms agree to rounding at any length.
constexpr int64_t kChunk = 64;

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// torch's softplus: x itself above 20, where log1p(exp(x)) rounds to x anyway.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

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
  const std::vector<float> conv = weights.dequantize(prefix + "conv1d.weight").toFloats();
  convTaps_.resize(conv.size());
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t j = 0; j < kernel_; ++j)
      convTaps_[static_cast<size_t>(j * channels + c)] = conv[static_cast<size_t>(c * kernel_ + j)];
  for (float aLog : loadVector(weights, prefix + "A_log", valueHeads_)) decayRate_.push_back(-std::exp(aLog));
  dtBias_ = loadVector(weights, prefix + "dt_bias", valueHeads_);
  norm_ = loadVector(weights, prefix + "norm.weight", valueDim_);
}

void GatedDeltaNet::forward(const float* x, const Batch& batch, int64_t layer, float* out) const {
  const int64_t rows = batch.rows, channels = qkv_.out(), valueWidth = valueHeads_ * valueDim_;
  std::vector<float> qkv(static_cast<size_t>(rows * channels)), z(static_cast<size_t>(rows * valueWidth)),
      b(static_cast<size_t>(rows * valueHeads_)), a(static_cast<size_t>(rows * valueHeads_)),
      o(static_cast<size_t>(rows * valueWidth));
  Linear::applyAll({&qkv_, &z_, &b_, &a_}, x, rows, {qkv.data(), z.data(), b.data(), a.data()});
  for (const Batch::Sequence& seq : batch.sequences)
    mixSequence(qkv.data() + seq.first * channels, b.data() + seq.first * valueHeads_,
                a.data() + seq.first * valueHeads_, seq, layer, o.data() + seq.first * valueWidth);
  delta::gatedNorm(o.data(), z.data(), norm_.data(), rows * valueHeads_, valueDim_, eps_);
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
  const int64_t channels = qkv_.out(), keyWidth = keyHeads_ * keyDim_, held = kernel_ - 1;
  // The causal depthwise conv reads the held inputs, then these rows; it keeps the last ones.
  std::vector<float> mixed(static_cast<size_t>(rows * channels));
  delta::convSilu(state.conv.data(), qkv, convTaps_.data(), rows, channels, kernel_, mixed.data());
  if (rows >= held) {
    std::copy(qkv + (rows - held) * channels, qkv + rows * channels, state.conv.begin());
  } else {
    std::copy(state.conv.begin() + rows * channels, state.conv.end(), state.conv.begin());
    std::copy(qkv, qkv + rows * channels, state.conv.end() - rows * channels);
  }

  const float queryScale = 1.0f / std::sqrt(static_cast<float>(keyDim_));
  for (int64_t t = 0; t < rows; ++t) {
    delta::l2normalize(mixed.data() + t * channels, keyHeads_, keyDim_, keyDim_, queryScale);
    delta::l2normalize(mixed.data() + t * channels + keyWidth, keyHeads_, keyDim_, keyDim_, 1.0f);
  }
  std::vector<float> beta(static_cast<size_t>(rows * valueHeads_)), g(beta.size());
  for (int64_t i = 0; i < rows * valueHeads_; ++i) {
    const int64_t h = i % valueHeads_;
    beta[static_cast<size_t>(i)] = sigmoid(b[i]);
    g[static_cast<size_t>(i)] = decayRate_[static_cast<size_t>(h)] * softplus(a[i] + dtBias_[static_cast<size_t>(h)]);
  }
  if (rows == 1)
    recurrent(mixed.data(), beta.data(), g.data(), rows, state, o);
  else
    chunked(mixed.data(), beta.data(), g.data(), rows, state, o);
}

void GatedDeltaNet::recurrent(const float* mixed, const float* beta, const float* g, int64_t rows,
                              DeltaNetState& state, float* o) const {
  const int64_t dk = keyDim_, dv = valueDim_, perKey = valueHeads_ / keyHeads_;
  const int64_t channels = qkv_.out(), keyWidth = keyHeads_ * dk;
  core::parallelFor(valueHeads_, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t t = 0; t < rows; ++t) {
        const float* q = mixed + t * channels + h / perKey * dk;
        const float* v = mixed + t * channels + 2 * keyWidth + h * dv;
        delta::step(state.memory.data() + h * dk * dv, q, q + keyWidth, v, std::exp(g[t * valueHeads_ + h]),
                    beta[t * valueHeads_ + h], dk, dv, o + (t * valueHeads_ + h) * dv);
      }
  });
}

// Within a chunk of L tokens, with c the cumulative log decay, D[i][j] = e^(c_i - c_j) (j <= i)
// and A[i][j] = beta_i (k_i . k_j) D[i][j] (j < i), the rule's updates condense to
// U = T beta v and W = T beta e^c k with T = (I + A)^-1; then, from the state S before the chunk,
//   v' = U - W S,   o = e^c Q S + (Q K^T . D) v',   S <- e^(c_last) S + (D[last] K)^T v'.
// The products are sgemm calls on the rows in place (strides); T comes by forward substitution.
void GatedDeltaNet::chunked(const float* mixed, const float* beta, const float* g, int64_t rows,
                            DeltaNetState& state, float* o) const {
  const int64_t dk = keyDim_, dv = valueDim_, perKey = valueHeads_ / keyHeads_;
  const int64_t channels = qkv_.out(), keyWidth = keyHeads_ * dk, oStride = valueHeads_ * dv, uwWidth = dv + dk;
  core::parallelFor(valueHeads_, 1, [&](int64_t h0, int64_t h1) {
    std::vector<float> c(kChunk), growth(kChunk), decay(kChunk * kChunk), kk(decay.size()), qk(decay.size()),
        tri(decay.size()), rhs(static_cast<size_t>(kChunk * uwWidth)), uw(rhs.size()),
        keysT(static_cast<size_t>(dk * kChunk));
    for (int64_t h = h0; h < h1; ++h) {
      float* s = state.memory.data() + h * dk * dv;
      const float* q = mixed + h / perKey * dk;
      const float* k = q + keyWidth;
      const float* v = mixed + 2 * keyWidth + h * dv;
      for (int64_t c0 = 0; c0 < rows; c0 += kChunk) {
        const int64_t L = std::min(kChunk, rows - c0);
        const float* qc = q + c0 * channels;
        const float* kc = k + c0 * channels;
        const float* vc = v + c0 * channels;
        float* oc = o + c0 * oStride + h * dv;
        float sum = 0.0f;
        for (int64_t i = 0; i < L; ++i) {
          c[static_cast<size_t>(i)] = sum += g[(c0 + i) * valueHeads_ + h];
          growth[static_cast<size_t>(i)] = std::exp(sum);
        }
        for (int64_t i = 0; i < L; ++i)
          for (int64_t j = 0; j < L; ++j)
            decay[static_cast<size_t>(i * L + j)] = j <= i ? c[static_cast<size_t>(i)] - c[static_cast<size_t>(j)] : -INFINITY;
        cpu::unaryF32(tensor::UnaryOp::Exp, decay.data(), decay.data(), L * L);
        cpu::sgemm(L, L, dk, kc, channels, 1, kc, 1, channels, kk.data(), L, false);
        cpu::sgemm(L, L, dk, qc, channels, 1, kc, 1, channels, qk.data(), L, false);

        // Row i of T is e_i - sum_{j < i} A[i][j] (row j of T), nonzero up to column j.
        std::fill(tri.begin(), tri.end(), 0.0f);
        for (int64_t i = 0; i < L; ++i) {
          float* ti = tri.data() + i * L;
          ti[i] = 1.0f;
          const float bi = beta[(c0 + i) * valueHeads_ + h];
          for (int64_t j = 0; j < i; ++j) {
            const float aij = bi * kk[static_cast<size_t>(i * L + j)] * decay[static_cast<size_t>(i * L + j)];
            const float* tj = tri.data() + j * L;
            for (int64_t m = 0; m <= j; ++m) ti[m] -= aij * tj[m];
          }
        }
        // [U | -W] = T [beta v | -beta e^c k]; then U - W S is v'.
        for (int64_t i = 0; i < L; ++i) {
          const float bi = beta[(c0 + i) * valueHeads_ + h], bk = -bi * growth[static_cast<size_t>(i)];
          float* r = rhs.data() + i * uwWidth;
          for (int64_t p = 0; p < dv; ++p) r[p] = bi * vc[i * channels + p];
          for (int64_t p = 0; p < dk; ++p) r[dv + p] = bk * kc[i * channels + p];
        }
        cpu::sgemm(L, uwWidth, L, tri.data(), L, 1, rhs.data(), uwWidth, 1, uw.data(), uwWidth, false);
        cpu::sgemm(L, dv, dk, uw.data() + dv, uwWidth, 1, s, dv, 1, uw.data(), uwWidth, true);

        cpu::sgemm(L, dv, dk, qc, channels, 1, s, dv, 1, oc, oStride, false);
        for (int64_t i = 0; i < L; ++i)
          for (int64_t p = 0; p < dv; ++p) oc[i * oStride + p] *= growth[static_cast<size_t>(i)];
        for (int64_t i = 0; i < L * L; ++i) qk[static_cast<size_t>(i)] *= decay[static_cast<size_t>(i)];
        cpu::sgemm(L, dv, L, qk.data(), L, 1, uw.data(), uwWidth, 1, oc, oStride, true);

        const float* last = decay.data() + (L - 1) * L;  // e^(c_last - c_i)
        for (int64_t i = 0; i < L; ++i)
          for (int64_t p = 0; p < dk; ++p) keysT[static_cast<size_t>(p * L + i)] = last[i] * kc[i * channels + p];
        const float chunkDecay = growth[static_cast<size_t>(L - 1)];
        for (int64_t i = 0; i < dk * dv; ++i) s[i] *= chunkDecay;
        cpu::sgemm(dk, dv, L, keysT.data(), L, 1, uw.data(), uwWidth, 1, s, dv, true);
      }
    }
  });
}

}  // namespace gizml::llm
