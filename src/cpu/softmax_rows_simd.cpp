// expShifted, scaledExp and weightedRows (cpu/softmax_rows.h), written once with Highway and compiled for each x86
// target; the dispatcher picks the best one the CPU supports at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/softmax_rows_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

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

ExpSum ScaledExp(float* p, int64_t n, float scale) {
  // Registers of at most kSumChains lanes, so that the chains are the same on every target.
  const hn::CappedTag<float, kSumChains> d;
  constexpr size_t kRegisters = kSumChains / hn::MaxLanes(hn::CappedTag<float, kSumChains>());
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  static_assert(kSumChains % hn::MaxLanes(hn::CappedTag<float, kSumChains>()) == 0);
  const auto s = hn::Set(d, scale);
  auto top = hn::Set(d, -std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + lanes <= n; j += lanes) {
    const auto x = hn::Mul(hn::LoadU(d, p + j), s);
    hn::StoreU(x, d, p + j);
    top = hn::Max(top, x);
  }
  float highest = hn::GetLane(hn::MaxOfLanes(d, top));
  for (; j < n; ++j) highest = std::max(highest, p[j] *= scale);
  ExpShifted(p, n, highest);
  // Chain c adds p[c], p[c + kSumChains], ...: kSumChains whole lanes at a time, then the rest
  // (the lanes past it add zeros, exact).
  std::array<decltype(top), kRegisters> sums;
  for (auto& sum : sums) sum = hn::Zero(d);
  for (j = 0; j + kSumChains <= n; j += kSumChains)
    for (size_t r = 0; r < kRegisters; ++r) sums[r] = hn::Add(sums[r], hn::LoadU(d, p + j + r * lanes));
  HWY_ALIGN float chains[kSumChains] = {};
  std::copy(p + j, p + n, chains);
  for (size_t r = 0; r < kRegisters; ++r)
    hn::Store(hn::Add(sums[r], hn::Load(d, chains + r * lanes)), d, chains + r * lanes);
  float total = 0.0f;
  for (const float chain : chains) total += chain;
  return {highest, total};
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
HWY_EXPORT(ScaledExp);
HWY_EXPORT(WeightedRows);

void expShifted(float* w, int64_t n, float m) { HWY_DYNAMIC_DISPATCH(ExpShifted)(w, n, m); }

ExpSum scaledExp(float* p, int64_t n, float scale) { return HWY_DYNAMIC_DISPATCH(ScaledExp)(p, n, scale); }

void weightedRows(float* acc, int64_t e, float c, const float* w, int64_t n, const float* v, int64_t ldv) {
  HWY_DYNAMIC_DISPATCH(WeightedRows)(acc, e, c, w, n, v, ldv);
}
}  // namespace gizml::cpu
#endif
