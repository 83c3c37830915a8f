// expShifted and weightedRows (cpu/softmax_rows.h), written once with Highway and compiled for each x86
// target; the dispatcher picks the best one the CPU supports at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/softmax_rows_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <algorithm>
#include <cmath>

#include "cpu/gz_exp-inl.h"
#include "cpu/softmax_rows.h"

HWY_BEFORE_NAMESPACE();
namespace gizml::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void ExpShifted(float* w, int64_t n, float m) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const V shift = hn::Set(d, m);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(GzExp(d, hn::Sub(hn::LoadU(d, w + i), shift)), d, w + i);
  if (i == n) return;
  HWY_ALIGN float rest[hn::MaxLanes(D())] = {};  // the last partial register, through a copy
  std::copy(w + i, w + n, rest);
  hn::Store(GzExp(d, hn::Sub(hn::Load(d, rest), shift)), d, rest);
  std::copy(rest, rest + (n - i), w + i);
}

void WeightedRows(float* acc, int64_t e, float c, const float* w, int64_t n, const float* v, int64_t ldv) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const V scale = hn::Set(d, c);
  int64_t x0 = 0;
  for (; x0 + 2 * lanes <= e; x0 += 2 * lanes) {  // two registers: two chains in flight
    V a0 = hn::Mul(hn::LoadU(d, acc + x0), scale), a1 = hn::Mul(hn::LoadU(d, acc + x0 + lanes), scale);
    for (int64_t j = 0; j < n; ++j) {
      const V wj = hn::Set(d, w[j]);
      a0 = Fma(d, wj, hn::LoadU(d, v + j * ldv + x0), a0);
      a1 = Fma(d, wj, hn::LoadU(d, v + j * ldv + x0 + lanes), a1);
    }
    hn::StoreU(a0, d, acc + x0);
    hn::StoreU(a1, d, acc + x0 + lanes);
  }
  for (; x0 + lanes <= e; x0 += lanes) {
    V a = hn::Mul(hn::LoadU(d, acc + x0), scale);
    for (int64_t j = 0; j < n; ++j) a = Fma(d, hn::Set(d, w[j]), hn::LoadU(d, v + j * ldv + x0), a);
    hn::StoreU(a, d, acc + x0);
  }
  if constexpr (hn::MaxLanes(D()) > 8) {  // a half register (heads of 24 columns, say)
    const hn::CappedTag<float, 8> d8;
    if (x0 + 8 <= e) {
      auto a = hn::Mul(hn::LoadU(d8, acc + x0), hn::Set(d8, c));
      for (int64_t j = 0; j < n; ++j)
        a = hn::MulAdd(hn::Set(d8, w[j]), hn::LoadU(d8, v + j * ldv + x0), a);
      hn::StoreU(a, d8, acc + x0);
      x0 += 8;
    }
  }
  for (; x0 < e; ++x0) {  // the columns past the last whole register
    float a = acc[x0] * c;
    for (int64_t j = 0; j < n; ++j) a = std::fma(w[j], v[j * ldv + x0], a);
    acc[x0] = a;
  }
}

}  // namespace gizml::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gizml::cpu {
HWY_EXPORT(ExpShifted);
HWY_EXPORT(WeightedRows);

void expShifted(float* w, int64_t n, float m) { HWY_DYNAMIC_DISPATCH(ExpShifted)(w, n, m); }

void weightedRows(float* acc, int64_t e, float c, const float* w, int64_t n, const float* v, int64_t ldv) {
  HWY_DYNAMIC_DISPATCH(WeightedRows)(acc, e, c, w, n, v, ldv);
}
}  // namespace gizml::cpu
#endif
