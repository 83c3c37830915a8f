#include "llm/quant/group_search.h"

#include <cmath>

#include "cpu/cpu_features.h"

namespace gizml::llm::group_search {
namespace {

bool useAvx2() {
  static const bool avx2 = cpu::cpuFeatures().avx2;
  return avx2;
}

// max then min in the order of _mm256_max_ps / _mm256_min_ps, so a NaN gives 0 on both paths.
float code(float v, float nmax) {
  const float f = std::floor(v);
  const float low = f > 0.0f ? f : 0.0f;
  return low < nmax ? low : nmax;
}

}  // namespace

FitSums fitSums(const float* x, int64_t n, float lo, float iscale, float nmax) {
  return useAvx2() ? fitSumsAvx2(x, n, lo, iscale, nmax) : fitSumsPortable(x, n, lo, iscale, nmax);
}

float squaredError(const float* x, int64_t n, float s, float inv, float z, float nmax) {
  return useAvx2() ? squaredErrorAvx2(x, n, s, inv, z, nmax) : squaredErrorPortable(x, n, s, inv, z, nmax);
}

FitSums fitSumsPortable(const float* x, int64_t n, float lo, float iscale, float nmax) {
  float sl[8] = {}, sl2[8] = {};
  double sxl[8] = {};
  for (int64_t i = 0; i < n; ++i) {
    const float l = code((x[i] - lo) * iscale + 0.5f, nmax);
    sl[i % 8] += l;
    sl2[i % 8] += l * l;
    sxl[i % 8] += static_cast<double>(l * x[i]);
  }
  FitSums s;
  for (int j = 0; j < 8; ++j) {
    s.sl += sl[j];
    s.sl2 += sl2[j];
    s.sxl += sxl[j];
  }
  return s;
}

float squaredErrorPortable(const float* x, int64_t n, float s, float inv, float z, float nmax) {
  float err[8] = {};
  for (int64_t i = 0; i < n; ++i) {
    const float q = code(x[i] * inv + z + 0.5f, nmax);
    const float d = s * (q - z) - x[i];
    err[i % 8] += d * d;
  }
  float total = 0;
  for (float e : err) total += e;
  return total;
}

}  // namespace gizml::llm::group_search
