// netops' gz_exp (netops/exp_log.inc) on a SIMD vector of f32, the same bits lane by lane, and
// the fma it needs on every target. Included once per Highway target, hence the toggling guard
// instead of #pragma once.
#if defined(GIZML_CPU_GZ_EXP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GIZML_CPU_GZ_EXP_INL_H_
#undef GIZML_CPU_GZ_EXP_INL_H_
#else
#define GIZML_CPU_GZ_EXP_INL_H_
#endif

#include <hwy/highway.h>

#include <cmath>
#include <limits>

HWY_BEFORE_NAMESPACE();
namespace gizml::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// A fused multiply-add on every target (lane by lane where the target has none).
HWY_INLINE V Fma(D d, V a, V b, V c) {
#if HWY_NATIVE_FMA
  (void)d;
  return hn::MulAdd(a, b, c);
#else
  constexpr size_t kMax = hn::MaxLanes(D());
  HWY_ALIGN float x[kMax], y[kMax], z[kMax];
  hn::Store(a, d, x);
  hn::Store(b, d, y);
  hn::Store(c, d, z);
  for (size_t i = 0; i < hn::Lanes(d); ++i) z[i] = std::fma(x[i], y[i], z[i]);
  return hn::Load(d, z);
#endif
}

// gz_exp (netops/exp_log.inc) lane by lane: the same operations, the branches as selects.
HWY_INLINE V GzExp(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V shifter = hn::Set(d, 12582912.0f);
  const V k = hn::Sub(Fma(d, x, hn::Set(d, 1.44269504088896341f), shifter), shifter);
  V r = Fma(d, k, hn::Set(d, -0.693359375f), x);
  r = Fma(d, k, hn::Set(d, 2.12194440e-4f), r);
  V p = hn::Set(d, 1.9875691500e-4f);
  p = Fma(d, p, r, hn::Set(d, 1.3981999507e-3f));
  p = Fma(d, p, r, hn::Set(d, 8.3334519073e-3f));
  p = Fma(d, p, r, hn::Set(d, 4.1665795894e-2f));
  p = Fma(d, p, r, hn::Set(d, 1.6666665459e-1f));
  p = Fma(d, p, r, hn::Set(d, 5.0000001201e-1f));
  V y = hn::Add(Fma(d, p, hn::Mul(r, r), r), hn::Set(d, 1.0f));
  auto e = hn::ConvertTo(di, k);  // k is whole: the scalar's (int)k
  // Every lane in [-87, 88] (none NaN): 2^k is a normal float (-126 <= k <= 127) and no fix-up
  // below changes a lane, so they are skipped, as for softmax's shifted scores nearly always
  // (they were a third of the operations).
  if (hn::AllTrue(d, hn::And(hn::Ge(x, hn::Set(d, -87.0f)), hn::Le(x, hn::Set(d, 88.0f)))))
    return hn::Mul(y, hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(e, hn::Set(di, 127)))));
  const auto big = hn::Gt(e, hn::Set(di, 127));
  y = hn::IfThenElse(hn::RebindMask(d, big), hn::Mul(y, hn::Set(d, 1.70141183460469231732e38f)), y);
  e = hn::IfThenElse(big, hn::Sub(e, hn::Set(di, 127)), e);
  const auto small = hn::Lt(e, hn::Set(di, -126));
  y = hn::IfThenElse(hn::RebindMask(d, small), hn::Mul(y, hn::Set(d, 1.17549435082228750797e-38f)), y);
  e = hn::IfThenElse(small, hn::Add(e, hn::Set(di, 126)), e);
  V out = hn::Mul(y, hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(e, hn::Set(di, 127)))));
  out = hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, -103.972084045410156f)), out);
  out = hn::IfThenElse(hn::Gt(x, hn::Set(d, 88.72283935546875f)), hn::Set(d, std::numeric_limits<float>::infinity()), out);
  return hn::IfThenElse(hn::IsNaN(x), x, out);
}

}  // namespace gizml::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // GIZML_CPU_GZ_EXP_INL_H_
