// codeValues (cpu/kv_codes.h), its passes over a head written once with Highway and compiled for
// each x86 target. The codes are the same on every target: the nearest-code pass is elementwise,
// the codes' integer sums are exact, and the two sums in double (of x and of q x) run in kChains
// interleaved chains (element i in chain i % kChains), added pairwise at the end, whatever the
// vector width. (A fit's last bits decide a value at a tie now and then, so the order is fixed.)
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/kv_codes.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <gizml/dtype.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/kv_codes.h"

#ifndef GIZML_KV_CODES_ONCE
#define GIZML_KV_CODES_ONCE
namespace gizml::cpu::kv_codes {

constexpr int kChains = 8;

inline double pairwiseTotal(const double (&chain)[kChains]) {
  return ((chain[0] + chain[1]) + (chain[2] + chain[3])) + ((chain[4] + chain[5]) + (chain[6] + chain[7]));
}

// One pass of nearest codes: whether any code changed, and the new codes' sums for the fit
// (sum q and sum q^2 exact in int: at most 512 codes of 255).
struct Assigned {
  bool changed;
  int sumQ, sumQQ;
};

}  // namespace gizml::cpu::kv_codes
#endif

HWY_BEFORE_NAMESPACE();
namespace gizml::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using kv_codes::kChains;

// Whether every value is finite, and the least and largest (min and max are exact in any order).
bool RangeOf(const float* x, int64_t n, float& lo, float& hi) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  auto vlo = hn::Set(d, x[0]), vhi = vlo;
  auto finite = hn::Eq(vlo, vlo);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(d, x + i);
    vlo = hn::Min(vlo, v), vhi = hn::Max(vhi, v);
    finite = hn::And(finite, hn::IsFinite(v));
  }
  bool allFinite = hn::AllTrue(d, finite);
  lo = hn::GetLane(hn::MinOfLanes(d, vlo)), hi = hn::GetLane(hn::MaxOfLanes(d, vhi));
  for (; i < n; ++i) {
    allFinite &= std::isfinite(x[i]);
    lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  }
  return allFinite;
}

// The sum of x (q null) or of q x in double, chain by chain (the header's order): a vector of N
// doubles holds chains k N .. k N + N - 1 of each block of kChains elements.
double ChainSum(const float* x, const uint8_t* q, int64_t n) {
  const hn::ScalableTag<double> d;
  const hn::Rebind<float, decltype(d)> df;
  const hn::Rebind<int32_t, decltype(d)> di;
  const hn::Rebind<uint8_t, decltype(d)> du8;
  const size_t lanes = hn::Lanes(d);
  double chain[kChains] = {};
  int64_t i = 0;
  if (lanes <= kChains && kChains % lanes == 0) {
    const size_t vectors = kChains / lanes;
    hn::Vec<decltype(d)> acc[kChains];
    for (size_t k = 0; k < vectors; ++k) acc[k] = hn::Zero(d);
    for (; i + kChains <= n; i += kChains)
      for (size_t k = 0; k < vectors; ++k) {
        const int64_t at = i + static_cast<int64_t>(k * lanes);
        auto term = hn::PromoteTo(d, hn::LoadU(df, x + at));
        // (q x is exact in double: 8 bits times a float's 24; no rounding before the add)
        if (q != nullptr) term = hn::Mul(hn::PromoteTo(d, hn::PromoteTo(di, hn::LoadU(du8, q + at))), term);
        acc[k] = hn::Add(acc[k], term);
      }
    for (size_t k = 0; k < vectors; ++k) hn::StoreU(acc[k], d, chain + k * lanes);
  }
  for (int64_t j = 0; i < n; ++i, ++j)
    chain[j % kChains] += q != nullptr ? static_cast<double>(q[i]) * x[i] : static_cast<double>(x[i]);
  return kv_codes::pairwiseTotal(chain);
}

// The nearest code of each value for scale s > 0 and offset o (halves up), written to q. Clamped
// first, so that truncating v + 1/2 rounds.
kv_codes::Assigned AssignCodes(const float* x, int64_t n, int top, float s, float o, uint8_t* q) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<uint8_t, decltype(di)> du8;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const float inverse = 1.0f / s, last = static_cast<float>(top);
  const auto vInverse = hn::Set(d, inverse), vOffset = hn::Set(d, o), vLast = hn::Set(d, last);
  const auto zero = hn::Zero(d), half = hn::Set(d, 0.5f);
  auto changed = hn::Zero(di), sumQ = hn::Zero(di), sumQQ = hn::Zero(di);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::Min(hn::Max(hn::Mul(hn::Sub(hn::LoadU(d, x + i), vOffset), vInverse), zero), vLast);
    const auto code = hn::ConvertTo(di, hn::Add(v, half));
    changed = hn::Or(changed, hn::Xor(code, hn::PromoteTo(di, hn::LoadU(du8, q + i))));
    hn::StoreU(hn::DemoteTo(du8, code), du8, q + i);
    sumQ = hn::Add(sumQ, code), sumQQ = hn::Add(sumQQ, hn::Mul(code, code));
  }
  kv_codes::Assigned out{!hn::AllTrue(di, hn::Eq(changed, hn::Zero(di))), hn::GetLane(hn::SumOfLanes(di, sumQ)),
                         hn::GetLane(hn::SumOfLanes(di, sumQQ))};
  for (; i < n; ++i) {
    const float v = std::min(std::max((x[i] - o) * inverse, 0.0f), last);
    const int code = static_cast<int>(v + 0.5f);
    out.changed |= code != q[i];
    q[i] = static_cast<uint8_t>(code);
    out.sumQ += code, out.sumQQ += code * code;
  }
  return out;
}

}  // namespace gizml::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gizml::cpu {
namespace {

HWY_EXPORT(RangeOf);
HWY_EXPORT(ChainSum);
HWY_EXPORT(AssignCodes);

// F16 bits of v, saturated to the largest finite F16 (a huge activation must not become inf).
uint16_t halfOf(double v) {
  constexpr double kLargest = 65504.0;
  return floatToHalf(static_cast<float>(std::clamp(v, -kLargest, kLargest)));
}

}  // namespace

CodeRange codeValues(const float* x, int64_t n, int bits, uint8_t* q) {
  const int top = (1 << bits) - 1;
  std::fill(q, q + n, uint8_t{0});
  if (n == 0) return {halfOf(0.0), halfOf(0.0)};
  float lo = 0, hi = 0;
  // A value that is not a number or infinite: the head decodes to NaN (as an F16 or F32 cache
  // would give it back, not as a number it never was).
  if (!HWY_DYNAMIC_DISPATCH(RangeOf)(x, n, lo, hi))
    return {halfOf(0.0), floatToHalf(std::numeric_limits<float>::quiet_NaN())};
  lo += 0.0f, hi += 0.0f;  // -0 as 0: which zero a vector's min keeps depends on its width
  if (!(hi > lo)) return {halfOf(0.0), halfOf(lo)};  // one value: every code 0, the offset the value
  const auto assign = HWY_DYNAMIC_DISPATCH(AssignCodes);
  const auto chainSum = HWY_DYNAMIC_DISPATCH(ChainSum);
  const double sumX = chainSum(x, nullptr, n), count = static_cast<double>(n);
  double s = (static_cast<double>(hi) - lo) / top, o = lo;
  kv_codes::Assigned codes = assign(x, n, top, static_cast<float>(s), static_cast<float>(o), q);
  // Lloyd's iteration: the least-squares pair for the codes, then the nearest codes for the pair.
  constexpr int kMaxRounds = 32;
  for (int round = 0; round < kMaxRounds; ++round) {
    const auto sq = static_cast<double>(codes.sumQ), sqq = static_cast<double>(codes.sumQQ);
    const double det = count * sqq - sq * sq;
    if (det <= 0) break;  // one code for every value: the pair stays
    const double fitS = (count * chainSum(x, q, n) - sq * sumX) / det;
    if (!(fitS > 0)) break;
    s = fitS;
    o = (sumX - s * sq) / count;
    codes = assign(x, n, top, static_cast<float>(s), static_cast<float>(o), q);
    if (!codes.changed) break;
  }
  // The pair as stored, and the nearest codes for it.
  const CodeRange range{halfOf(s), halfOf(o)};
  const float storedS = halfToFloat(range.scale), storedO = halfToFloat(range.offset);
  if (storedS > 0) assign(x, n, top, storedS, storedO, q);
  return range;
}

double codingError(const float* x, const uint8_t* q, int64_t n, CodeRange range) {
  const float s = halfToFloat(range.scale), o = halfToFloat(range.offset);
  double e = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(s * static_cast<float>(q[i]) + o) - x[i];
    e += d * d;
  }
  return e;
}

}  // namespace gizml::cpu
#endif
