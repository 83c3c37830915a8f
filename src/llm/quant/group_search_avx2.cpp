// group_search.h's AVX2 bodies: the portable loops' operations, one lane per value of a step of
// 8 (separate multiplies and adds, no fma, so the bits are the same).
#include <immintrin.h>

#include <cstring>

#include "llm/quant/group_search.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC target("avx2")
#endif

namespace gizml::llm::group_search {
namespace {

__m256 codes(__m256 v, __m256 nmax) {
  const __m256 f = _mm256_round_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  return _mm256_min_ps(_mm256_max_ps(f, _mm256_setzero_ps()), nmax);
}

template <typename T, typename V>
T addLanes(V v) {
  alignas(32) T lanes[sizeof(V) / sizeof(T)];
  std::memcpy(lanes, &v, sizeof(V));
  T total = 0;
  for (T l : lanes) total += l;
  return total;
}

}  // namespace

FitSums fitSumsAvx2(const float* x, int64_t n, float lo, float iscale, float nmax) {
  const __m256 vlo = _mm256_set1_ps(lo), vscale = _mm256_set1_ps(iscale), half = _mm256_set1_ps(0.5f),
               vmax = _mm256_set1_ps(nmax);
  __m256 sl = _mm256_setzero_ps(), sl2 = _mm256_setzero_ps();
  __m256d sxlLow = _mm256_setzero_pd(), sxlHigh = _mm256_setzero_pd();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 l = codes(_mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(v, vlo), vscale), half), vmax);
    sl = _mm256_add_ps(sl, l);
    sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(l, l));
    const __m256 p = _mm256_mul_ps(l, v);
    sxlLow = _mm256_add_pd(sxlLow, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
    sxlHigh = _mm256_add_pd(sxlHigh, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
  }
  alignas(32) double sxl[8];
  _mm256_store_pd(sxl, sxlLow);
  _mm256_store_pd(sxl + 4, sxlHigh);
  FitSums s;
  s.sl = addLanes<float>(sl);
  s.sl2 = addLanes<float>(sl2);
  for (double d : sxl) s.sxl += d;
  return s;
}

float squaredErrorAvx2(const float* x, int64_t n, float s, float inv, float z, float nmax) {
  const __m256 vs = _mm256_set1_ps(s), vinv = _mm256_set1_ps(inv), vz = _mm256_set1_ps(z),
               half = _mm256_set1_ps(0.5f), vmax = _mm256_set1_ps(nmax);
  __m256 err = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 q = codes(_mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(v, vinv), vz), half), vmax);
    const __m256 d = _mm256_sub_ps(_mm256_mul_ps(vs, _mm256_sub_ps(q, vz)), v);
    err = _mm256_add_ps(err, _mm256_mul_ps(d, d));
  }
  return addLanes<float>(err);
}

}  // namespace gizml::llm::group_search

#if defined(__clang__)
#pragma clang attribute pop
#endif
