// cpu/float_panels.h's AVX2 kernel: a step of a panel is two vectors of 8 columns (F16 widened by
// F16C, BF16 by a shift), and each activation row keeps its two accumulators in registers.
#include <immintrin.h>

#include "cpu/float_panels.h"
#include "cpu/gemm.h"

// After the headers, so that shared inline functions are not compiled for AVX2.
// (clang ignores GCC's pragma: it takes the same targets as an attribute of every function.)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC target("avx2,fma,f16c")
#endif

namespace gizml::cpu::float_panel_kernels {
namespace {

inline __m256 load8(DType t, const void* panel, int64_t i) {
  if (t == DType::F16)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(panel) + i)));
  if (t == DType::BF16)
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(panel) + i))),
        16));
  return _mm256_loadu_ps(static_cast<const float*>(panel) + i);
}

template <int M>
void product(DType t, const void* panel, int64_t k, const float* x, int64_t ldx, float* out) {
  __m256 total[M][2];
  for (int r = 0; r < M; ++r) total[r][0] = total[r][1] = _mm256_setzero_ps();
  for (int64_t k0 = 0; k0 < k; k0 += kGemmKc) {
    __m256 acc[M][2];
    for (int r = 0; r < M; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    const int64_t k1 = k0 + kGemmKc < k ? k0 + kGemmKc : k;
    for (int64_t p = k0; p < k1; ++p) {
      const __m256 w0 = load8(t, panel, p * kFloatPanelRows), w1 = load8(t, panel, p * kFloatPanelRows + 8);
      for (int r = 0; r < M; ++r) {
        const __m256 a = _mm256_set1_ps(x[r * ldx + p]);
        acc[r][0] = _mm256_fmadd_ps(a, w0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(a, w1, acc[r][1]);
      }
    }
    for (int r = 0; r < M; ++r)
      for (int v = 0; v < 2; ++v) total[r][v] = k0 == 0 ? acc[r][v] : _mm256_add_ps(total[r][v], acc[r][v]);
  }
  for (int r = 0; r < M; ++r) {
    _mm256_storeu_ps(out + r * kFloatPanelRows, total[r][0]);
    _mm256_storeu_ps(out + r * kFloatPanelRows + 8, total[r][1]);
  }
}

}  // namespace

void productAvx2(DType t, const void* panel, int64_t k, const float* x, int64_t ldx, int64_t m, float* out) {
  switch (m) {
    case 1: return product<1>(t, panel, k, x, ldx, out);
    case 2: return product<2>(t, panel, k, x, ldx, out);
    case 3: return product<3>(t, panel, k, x, ldx, out);
    default: return product<4>(t, panel, k, x, ldx, out);
  }
}

}  // namespace gizml::cpu::float_panel_kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
