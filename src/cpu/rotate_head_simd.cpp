// rotateHead (cpu/kv_attention.h), written once with Highway and compiled for each x86 target.
// Each output is the scalar transform's: every stage's a + b and a - b on the same two operands
// (a vector add is exact per lane and commutes), then the same multiply by 1 / sqrt(n). Stages
// whose pairs lie within a vector take the partner lane by a table lookup and pick the sum or
// the difference by the lane's bit.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/rotate_head_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <cmath>

#include "cpu/kv_attention.h"

HWY_BEFORE_NAMESPACE();
namespace gizml::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void RotateHead(float* x, int64_t n) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  if (n % lanes != 0) {  // heads narrower than a vector (or not a multiple of it): the scalar steps
    for (int64_t half = 1; half < n; half *= 2)
      for (int64_t i = 0; i < n; i += 2 * half)
        for (int64_t j = i; j < i + half; ++j) {
          const float a = x[j], b = x[j + half];
          x[j] = a + b;
          x[j + half] = a - b;
        }
  } else {
    const auto iota = hn::Iota(di, 0);
    for (int64_t half = 1; half < n; half *= 2) {
      if (half < lanes) {
        const auto bit = hn::Set(di, static_cast<int32_t>(half));
        HWY_ALIGN int32_t partner[hn::MaxLanes(decltype(di)())];
        hn::Store(hn::Xor(iota, bit), di, partner);
        const auto indices = hn::SetTableIndices(d, partner);
        // Lanes with the bit set hold x[j + half] = a - b, their partner being a = x[j].
        const auto upper = hn::RebindMask(d, hn::Ne(hn::And(iota, bit), hn::Zero(di)));
        for (int64_t i = 0; i < n; i += lanes) {
          const auto v = hn::LoadU(d, x + i), p = hn::TableLookupLanes(v, indices);
          hn::StoreU(hn::IfThenElse(upper, hn::Sub(p, v), hn::Add(v, p)), d, x + i);
        }
      } else {
        for (int64_t i = 0; i < n; i += 2 * half)
          for (int64_t j = i; j < i + half; j += lanes) {
            const auto a = hn::LoadU(d, x + j), b = hn::LoadU(d, x + j + half);
            hn::StoreU(hn::Add(a, b), d, x + j);
            hn::StoreU(hn::Sub(a, b), d, x + j + half);
          }
      }
    }
  }
  const float norm = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t i = 0; i < n; ++i) x[i] *= norm;
}

}  // namespace gizml::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gizml::cpu {
HWY_EXPORT(RotateHead);

void rotateHead(float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(RotateHead)(x, n); }
}  // namespace gizml::cpu
#endif
