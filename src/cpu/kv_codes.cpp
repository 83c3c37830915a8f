#include "cpu/kv_codes.h"

#include <gizml/dtype.h>

#include <algorithm>
#include <cmath>

namespace gizml::cpu {
namespace {

// F16 bits of v, saturated to the largest finite F16 (a huge activation must not become inf).
uint16_t halfOf(double v) {
  constexpr double kLargest = 65504.0;
  return floatToHalf(static_cast<float>(std::clamp(v, -kLargest, kLargest)));
}

// The nearest code of each value for scale s > 0 and offset o (halves up); whether any changed.
// Clamped first, so that truncating v + 1/2 rounds (no libm call on every element: a prefill
// codes every head of every token of every layer).
bool assign(const float* x, int64_t n, int top, float s, float o, uint8_t* q) {
  const float inverse = 1.0f / s, last = static_cast<float>(top);
  bool changed = false;
  for (int64_t i = 0; i < n; ++i) {
    const float v = std::clamp((x[i] - o) * inverse, 0.0f, last);
    const auto code = static_cast<uint8_t>(static_cast<int>(v + 0.5f));
    changed |= code != q[i];
    q[i] = code;
  }
  return changed;
}

}  // namespace

CodeRange codeValues(const float* x, int64_t n, int bits, uint8_t* q) {
  const int top = (1 << bits) - 1;
  const auto [lo, hi] = std::minmax_element(x, x + n);
  if (n == 0 || !(*hi > *lo)) {
    // One value (or none, or not numbers): every code 0, the offset the value.
    std::fill(q, q + n, uint8_t{0});
    return {halfOf(0.0), halfOf(n == 0 ? 0.0 : static_cast<double>(*lo))};
  }
  double s = (static_cast<double>(*hi) - *lo) / top, o = *lo;
  std::fill(q, q + n, uint8_t{0});
  assign(x, n, top, static_cast<float>(s), static_cast<float>(o), q);
  // Lloyd's iteration: the least-squares pair for the codes, then the nearest codes for the pair.
  constexpr int kMaxRounds = 32;
  for (int round = 0; round < kMaxRounds; ++round) {
    double sq = 0, sx = 0, sqq = 0, sqx = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double c = q[i], v = x[i];
      sq += c, sx += v, sqq += c * c, sqx += c * v;
    }
    const double count = static_cast<double>(n), det = count * sqq - sq * sq;
    if (det <= 0) break;  // one code for every value: the pair stays
    const double fitS = (count * sqx - sq * sx) / det;
    if (!(fitS > 0)) break;
    s = fitS;
    o = (sx - s * sq) / count;
    if (!assign(x, n, top, static_cast<float>(s), static_cast<float>(o), q)) break;
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
