// cpu/kv_rows.h's AVX2 kernels: eight values a step, F16 widened by F16C, BF16 by a shift.
#include <immintrin.h>

#include "cpu/kv_rows_kernels.h"

// After the headers, so that shared inline functions are not compiled for AVX2.
// (clang ignores GCC's pragma: it takes the same targets as an attribute of every function.)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC target("avx2,fma,f16c")
#endif

namespace gizml::cpu::kv_kernels {
namespace {

inline __m256 load8(DType t, const void* row, int64_t i) {
  if (t == DType::F16)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + i)));
  if (t == DType::BF16)
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + i))),
        16));
  return _mm256_loadu_ps(static_cast<const float*>(row) + i);
}

inline float load1(DType t, const void* row, int64_t i) {
  if (t == DType::F16) return _cvtsh_ss(static_cast<const uint16_t*>(row)[i]);
  if (t == DType::BF16) {
    const uint32_t u = static_cast<uint32_t>(static_cast<const uint16_t*>(row)[i]) << 16;
    return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(u))));
  }
  return static_cast<const float*>(row)[i];
}

}  // namespace

float dotAvx2(DType t, const void* row, const float* x, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(load8(t, row, i), _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(load8(t, row, i + 8), _mm256_loadu_ps(x + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(load8(t, row, i), _mm256_loadu_ps(x + i), acc0);
  const __m256 acc = _mm256_add_ps(acc0, acc1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float sum = _mm_cvtss_f32(s);
  for (; i < n; ++i) sum += x[i] * load1(t, row, i);
  return sum;
}

void addScaledAvx2(DType t, const void* row, float a, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, load8(t, row, i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * load1(t, row, i);
}

}  // namespace gizml::cpu::kv_kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
