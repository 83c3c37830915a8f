#include "cpu/delta_net.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/elementwise.h"
#include "cpu/flush_denormals.h"
#include "cpu/gemm.h"
#include "cpu/layer_rows.h"

namespace gizml::cpu::delta {
namespace {

// transformers' chunk length: the chunked and the recurrent forms agree to rounding at any length.
constexpr int64_t kChunk = 64;

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// torch's softplus: x itself above 20, where log1p(exp(x)) rounds to x anyway.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace

void mix(const Heads& h, int64_t kernel, const float* qkv, const float* b, const float* a, int64_t rows,
         const float* taps, const float* decayRate, const float* dtBias, float* conv, float* memory, float* o) {
  const int64_t keyWidth = h.keyHeads * h.keyDim, channels = 2 * keyWidth + h.valueHeads * h.valueDim;
  const int64_t held = kernel - 1;
  // The causal depthwise conv reads the held inputs, then these rows; it keeps the last ones.
  // The buffers are the calling thread's, kept from call to call.
  thread_local std::vector<float> mixed, beta, g;
  mixed.resize(static_cast<size_t>(rows * channels));
  convSilu(conv, qkv, taps, rows, channels, kernel, mixed.data());
  if (rows >= held) {
    std::copy(qkv + (rows - held) * channels, qkv + rows * channels, conv);
  } else {
    std::copy(conv + rows * channels, conv + held * channels, conv);
    std::copy(qkv, qkv + rows * channels, conv + (held - rows) * channels);
  }

  const float queryScale = 1.0f / std::sqrt(static_cast<float>(h.keyDim));
  beta.resize(static_cast<size_t>(rows * h.valueHeads));
  g.resize(beta.size());
  // Pointers, not the thread_local vectors: inside the workers those names are the workers' own.
  float *rowsOut = mixed.data(), *betas = beta.data(), *decays = g.data();
  forEachRow(rows, channels, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      l2normalize(rowsOut + t * channels, h.keyHeads, h.keyDim, h.keyDim, queryScale);
      l2normalize(rowsOut + t * channels + keyWidth, h.keyHeads, h.keyDim, h.keyDim, 1.0f);
      for (int64_t head = 0; head < h.valueHeads; ++head) {
        const int64_t i = t * h.valueHeads + head;
        betas[i] = sigmoid(b[i]);
        decays[i] = decayRate[head] * softplus(a[i] + dtBias[head]);
      }
    }
  });
  if (rows == 1)
    recurrent(h, mixed.data(), beta.data(), g.data(), rows, memory, o);
  else
    chunked(h, mixed.data(), beta.data(), g.data(), rows, memory, o);
}

void recurrent(const Heads& heads, const float* mixed, const float* beta, const float* g, int64_t rows, float* memory,
               float* o) {
  const int64_t dk = heads.keyDim, dv = heads.valueDim, valueHeads = heads.valueHeads;
  const int64_t perKey = valueHeads / heads.keyHeads, keyWidth = heads.keyHeads * dk;
  const int64_t channels = 2 * keyWidth + valueHeads * dv;
  core::parallelFor(valueHeads, 1, [&](int64_t h0, int64_t h1) {
    const FlushDenormals flush;  // a state decaying through 1e-38 stays fast
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t t = 0; t < rows; ++t) {
        const float* q = mixed + t * channels + h / perKey * dk;
        const float* v = mixed + t * channels + 2 * keyWidth + h * dv;
        step(memory + h * dk * dv, q, q + keyWidth, v, std::exp(g[t * valueHeads + h]),
                    beta[t * valueHeads + h], dk, dv, o + (t * valueHeads + h) * dv);
      }
  });
}

// Within a chunk of L tokens, with c the cumulative log decay, D[i][j] = e^(c_i - c_j) (j <= i)
// and A[i][j] = beta_i (k_i . k_j) D[i][j] (j < i), the rule's updates condense to
// U = T beta v and W = T beta e^c k with T = (I + A)^-1; then, from the state S before the chunk,
//   v' = U - W S,   o = e^c Q S + (Q K^T . D) v',   S <- e^(c_last) S + (D[last] K)^T v'.
// The products are sgemm calls on the rows in place (strides); T comes by forward substitution.
void chunked(const Heads& heads, const float* mixed, const float* beta, const float* g, int64_t rows, float* memory,
             float* o) {
  const int64_t dk = heads.keyDim, dv = heads.valueDim, valueHeads = heads.valueHeads;
  const int64_t perKey = valueHeads / heads.keyHeads, keyWidth = heads.keyHeads * dk;
  const int64_t channels = 2 * keyWidth + valueHeads * dv, oStride = valueHeads * dv, uwWidth = dv + dk;
  core::parallelFor(valueHeads, 1, [&](int64_t h0, int64_t h1) {
    // The decays within a chunk, the products with them and the state fall through the
    // denormal range: with their assists the rule took a third of a 512-token prefill.
    const FlushDenormals flush;
    std::vector<float> c(kChunk), growth(kChunk), decay(kChunk * kChunk), kk(decay.size()), qk(decay.size()),
        tri(decay.size()), rhs(static_cast<size_t>(kChunk * uwWidth)), uw(rhs.size()),
        keysT(static_cast<size_t>(dk * kChunk));
    for (int64_t h = h0; h < h1; ++h) {
      float* s = memory + h * dk * dv;
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
          c[static_cast<size_t>(i)] = sum += g[(c0 + i) * valueHeads + h];
          growth[static_cast<size_t>(i)] = std::exp(sum);
        }
        for (int64_t i = 0; i < L; ++i)
          for (int64_t j = 0; j < L; ++j)
            decay[static_cast<size_t>(i * L + j)] = j <= i ? c[static_cast<size_t>(i)] - c[static_cast<size_t>(j)] : -INFINITY;
        unaryF32(tensor::UnaryOp::Exp, decay.data(), decay.data(), L * L);
        sgemm(L, L, dk, kc, channels, 1, kc, 1, channels, kk.data(), L, false);
        sgemm(L, L, dk, qc, channels, 1, kc, 1, channels, qk.data(), L, false);

        // Row i of T is e_i - sum_{j < i} A[i][j] (row j of T), nonzero up to column j.
        std::fill(tri.begin(), tri.end(), 0.0f);
        for (int64_t i = 0; i < L; ++i) {
          float* ti = tri.data() + i * L;
          ti[i] = 1.0f;
          const float bi = beta[(c0 + i) * valueHeads + h];
          for (int64_t j = 0; j < i; ++j) {
            const float aij = bi * kk[static_cast<size_t>(i * L + j)] * decay[static_cast<size_t>(i * L + j)];
            const float* tj = tri.data() + j * L;
            for (int64_t m = 0; m <= j; ++m) ti[m] -= aij * tj[m];
          }
        }
        // [U | -W] = T [beta v | -beta e^c k]; then U - W S is v'.
        for (int64_t i = 0; i < L; ++i) {
          const float bi = beta[(c0 + i) * valueHeads + h], bk = -bi * growth[static_cast<size_t>(i)];
          float* r = rhs.data() + i * uwWidth;
          for (int64_t p = 0; p < dv; ++p) r[p] = bi * vc[i * channels + p];
          for (int64_t p = 0; p < dk; ++p) r[dv + p] = bk * kc[i * channels + p];
        }
        sgemm(L, uwWidth, L, tri.data(), L, 1, rhs.data(), uwWidth, 1, uw.data(), uwWidth, false);
        sgemm(L, dv, dk, uw.data() + dv, uwWidth, 1, s, dv, 1, uw.data(), uwWidth, true);

        sgemm(L, dv, dk, qc, channels, 1, s, dv, 1, oc, oStride, false);
        for (int64_t i = 0; i < L; ++i)
          for (int64_t p = 0; p < dv; ++p) oc[i * oStride + p] *= growth[static_cast<size_t>(i)];
        for (int64_t i = 0; i < L * L; ++i) qk[static_cast<size_t>(i)] *= decay[static_cast<size_t>(i)];
        sgemm(L, dv, L, qk.data(), L, 1, uw.data(), uwWidth, 1, oc, oStride, true);

        const float* last = decay.data() + (L - 1) * L;  // e^(c_last - c_i)
        for (int64_t i = 0; i < L; ++i)
          for (int64_t p = 0; p < dk; ++p) keysT[static_cast<size_t>(p * L + i)] = last[i] * kc[i * channels + p];
        const float chunkDecay = growth[static_cast<size_t>(L - 1)];
        for (int64_t i = 0; i < dk * dv; ++i) s[i] *= chunkDecay;
        sgemm(dk, dv, L, keysT.data(), L, 1, uw.data(), uwWidth, 1, s, dv, true);
      }
    }
  });
}

}  // namespace gizml::cpu::delta
