// normalizeAct (cpu/norm_act.h), written once with Highway and compiled for each x86 target; the
// dispatcher picks the best one the CPU supports at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/norm_act_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <algorithm>

#include "cpu/gz_exp-inl.h"
#include "cpu/norm_act.h"

HWY_BEFORE_NAMESPACE();
namespace gizml::cpu::HWY_NAMESPACE {

template <bool kSilu>
HWY_INLINE V NormalizeAct(D d, V x, V mu, V rstd, V w, V b) {
  const V v = hn::Add(hn::Mul(hn::Mul(hn::Sub(x, mu), rstd), w), b);
  if constexpr (!kSilu) return v;
  return hn::Div(v, hn::Add(hn::Set(d, 1.0f), GzExp(d, hn::Neg(v))));
}

template <bool kSilu>
void Run(const float* in, int64_t n, float mu, float rstd, float w, float b, float* out) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const V vm = hn::Set(d, mu), vr = hn::Set(d, rstd), vw = hn::Set(d, w), vb = hn::Set(d, b);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(NormalizeAct<kSilu>(d, hn::LoadU(d, in + i), vm, vr, vw, vb), d, out + i);
  if (i == n) return;
  HWY_ALIGN float rest[hn::MaxLanes(D())] = {};  // the last partial register, through a copy
  std::copy(in + i, in + n, rest);
  hn::Store(NormalizeAct<kSilu>(d, hn::Load(d, rest), vm, vr, vw, vb), d, rest);
  std::copy(rest, rest + (n - i), out + i);
}

void NormalizeActRows(const float* in, int64_t n, float mu, float rstd, float w, float b, bool silu, float* out) {
  if (silu) Run<true>(in, n, mu, rstd, w, b, out);
  else Run<false>(in, n, mu, rstd, w, b, out);
}

}  // namespace gizml::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gizml::cpu {
HWY_EXPORT(NormalizeActRows);

void normalizeAct(const float* in, int64_t n, float mu, float rstd, float w, float b, bool silu, float* out) {
  HWY_DYNAMIC_DISPATCH(NormalizeActRows)(in, n, mu, rstd, w, b, silu, out);
}
}  // namespace gizml::cpu
#endif
