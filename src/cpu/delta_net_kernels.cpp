// Gated DeltaNet's inner loops with Highway (see delta_net.h); the activations use
// the same vector sigmoid as the elementwise kernels (cpu/elementwise-inl.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/delta_net_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <cmath>

#include "cpu/elementwise-inl.h"
#include "cpu/delta_net.h"
#include "cpu/layer_rows.h"

HWY_BEFORE_NAMESPACE();
namespace gizml::cpu::delta {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;
using gizml::cpu::HWY_NAMESPACE::Sigmoid;

float ScalarSilu(float x) { return x / (1.0f + std::exp(-x)); }

float Dot(const float* HWY_RESTRICT x, const float* HWY_RESTRICT y, int64_t n) {
  const D d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  V a0 = hn::Zero(d), a1 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    a0 = hn::MulAdd(hn::LoadU(d, x + i), hn::LoadU(d, y + i), a0);
    a1 = hn::MulAdd(hn::LoadU(d, x + i + lanes), hn::LoadU(d, y + i + lanes), a1);
  }
  for (; i + lanes <= n; i += lanes) a0 = hn::MulAdd(hn::LoadU(d, x + i), hn::LoadU(d, y + i), a0);
  float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(a0, a1)));
  for (; i < n; ++i) sum += x[i] * y[i];
  return sum;
}

// Output rows [t0, t1) of convSilu.
void ConvSilu(const float* HWY_RESTRICT held, const float* HWY_RESTRICT x, const float* HWY_RESTRICT taps, int64_t t0,
              int64_t t1, int64_t channels, int64_t kernel, float* HWY_RESTRICT out) {
  const D d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t nHeld = kernel - 1;
  auto input = [&](int64_t r) { return r < nHeld ? held + r * channels : x + (r - nHeld) * channels; };
  for (int64_t t = t0; t < t1; ++t) {
    float* o = out + t * channels;
    int64_t c = 0;
    for (; c + lanes <= channels; c += lanes) {
      V acc = hn::Zero(d);
      for (int64_t j = 0; j < kernel; ++j)
        acc = hn::MulAdd(hn::LoadU(d, taps + j * channels + c), hn::LoadU(d, input(t + j) + c), acc);
      hn::StoreU(hn::Mul(acc, Sigmoid(d, acc)), d, o + c);
    }
    for (; c < channels; ++c) {
      float acc = 0.0f;
      for (int64_t j = 0; j < kernel; ++j) acc += taps[j * channels + c] * input(t + j)[c];
      o[c] = ScalarSilu(acc);
    }
  }
}

void L2Normalize(float* HWY_RESTRICT x, int64_t count, int64_t stride, int64_t n, float scale) {
  const D d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = 0; r < count; ++r) {
    float* v = x + r * stride;
    const float f = scale / std::sqrt(Dot(v, v, n) + 1e-6f);
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes) hn::StoreU(hn::Mul(hn::LoadU(d, v + i), hn::Set(d, f)), d, v + i);
    for (; i < n; ++i) v[i] *= f;
  }
}

// Columns j .. j + kVectors * lanes - 1 of the step: with S the state before the token,
// a = S^T k and b = S^T q over these columns, then delta = beta (v - decay a),
// o = decay b + (k . q) delta and S = decay S + k delta^T.
template <int kVectors, class DT>
void StepColumns(DT d, float* HWY_RESTRICT s, const float* q, const float* k, const float* v, float decay, float beta,
                 float kq, int64_t dk, int64_t dv, int64_t j, float* o) {
  using VT = hn::Vec<DT>;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  VT a[kVectors], b[kVectors], delta[kVectors];
  for (int u = 0; u < kVectors; ++u) a[u] = b[u] = hn::Zero(d);
  for (int64_t i = 0; i < dk; ++i) {
    const VT ki = hn::Set(d, k[i]), qi = hn::Set(d, q[i]);
    const float* row = s + i * dv + j;
    for (int u = 0; u < kVectors; ++u) {
      const VT x = hn::LoadU(d, row + u * lanes);
      a[u] = hn::MulAdd(ki, x, a[u]);
      b[u] = hn::MulAdd(qi, x, b[u]);
    }
  }
  const VT dec = hn::Set(d, decay), bet = hn::Set(d, beta), kqv = hn::Set(d, kq);
  for (int u = 0; u < kVectors; ++u) {
    delta[u] = hn::Mul(bet, hn::NegMulAdd(dec, a[u], hn::LoadU(d, v + j + u * lanes)));
    hn::StoreU(hn::MulAdd(kqv, delta[u], hn::Mul(dec, b[u])), d, o + j + u * lanes);
  }
  for (int64_t i = 0; i < dk; ++i) {
    const VT ki = hn::Set(d, k[i]);
    float* row = s + i * dv + j;
    for (int u = 0; u < kVectors; ++u)
      hn::StoreU(hn::MulAdd(ki, delta[u], hn::Mul(dec, hn::LoadU(d, row + u * lanes))), d, row + u * lanes);
  }
}

void Step(float* HWY_RESTRICT s, const float* q, const float* k, const float* v, float decay, float beta, int64_t dk,
          int64_t dv, float* o) {
  const D d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const float kq = Dot(k, q, dk);
  int64_t j = 0;
  for (; j + 4 * lanes <= dv; j += 4 * lanes) StepColumns<4>(d, s, q, k, v, decay, beta, kq, dk, dv, j, o);
  for (; j + lanes <= dv; j += lanes) StepColumns<1>(d, s, q, k, v, decay, beta, kq, dk, dv, j, o);
  const hn::CappedTag<float, 1> one;
  for (; j < dv; ++j) StepColumns<1>(one, s, q, k, v, decay, beta, kq, dk, dv, j, o);
}

void GatedNorm(float* HWY_RESTRICT o, const float* HWY_RESTRICT z, const float* HWY_RESTRICT w, int64_t count,
               int64_t n, float eps) {
  const D d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = 0; r < count; ++r) {
    float* v = o + r * n;
    const float* gate = z + r * n;
    const float inv = 1.0f / std::sqrt(Dot(v, v, n) / static_cast<float>(n) + eps);
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes) {
      const V g = hn::LoadU(d, gate + i);
      const V normed = hn::Mul(hn::Mul(hn::LoadU(d, v + i), hn::Set(d, inv)), hn::LoadU(d, w + i));
      hn::StoreU(hn::Mul(normed, hn::Mul(g, Sigmoid(d, g))), d, v + i);
    }
    for (; i < n; ++i) v[i] = v[i] * inv * w[i] * ScalarSilu(gate[i]);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace gizml::cpu::delta
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gizml::cpu::delta {
HWY_EXPORT(ConvSilu);
HWY_EXPORT(L2Normalize);
HWY_EXPORT(Step);
HWY_EXPORT(GatedNorm);

void convSilu(const float* held, const float* x, const float* taps, int64_t rows, int64_t channels, int64_t kernel,
              float* out) {
  forEachRow(rows, channels * kernel, [&](int64_t t0, int64_t t1) {
    HWY_DYNAMIC_DISPATCH(ConvSilu)(held, x, taps, t0, t1, channels, kernel, out);
  });
}
void l2normalize(float* x, int64_t count, int64_t stride, int64_t n, float scale) {
  HWY_DYNAMIC_DISPATCH(L2Normalize)(x, count, stride, n, scale);
}
void step(float* s, const float* q, const float* k, const float* v, float decay, float beta, int64_t dk, int64_t dv,
          float* o) {
  HWY_DYNAMIC_DISPATCH(Step)(s, q, k, v, decay, beta, dk, dv, o);
}
void gatedNorm(float* o, const float* z, const float* w, int64_t count, int64_t n, float eps) {
  forEachRow(count, n, [&](int64_t r0, int64_t r1) {
    HWY_DYNAMIC_DISPATCH(GatedNorm)(o + r0 * n, z + r0 * n, w, r1 - r0, n, eps);
  });
}
}  // namespace gizml::cpu::delta
#endif
