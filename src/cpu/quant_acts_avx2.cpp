// quantizeActs' AVX2 body (quant_dot.h): the same codes, scales and sums as the portable loop
// (max of |x|, then x * 127 / amax rounded half to even, as nearbyint in the default mode), eight
// values a step.
#include <immintrin.h>

#include <cstdint>

#include "cpu/quant_dot_kernels.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC target("avx2,fma")
#endif

namespace gizml::cpu::quant_kernels {

void quantizeGroupsAvx2(const float* x, int64_t blocks, int64_t group, int8_t* codes, float* scale, float* sum) {
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t b = 0; b < blocks; ++b, x += group, codes += group) {
    __m256 m = _mm256_setzero_ps();
    for (int64_t i = 0; i < group; i += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + i), absMask));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h), d = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
    const __m256 vinv = _mm256_set1_ps(inv);
    __m256i total = _mm256_setzero_si256();
    for (int64_t i = 0; i < group; i += 8) {
      const __m256i c = _mm256_cvtps_epi32(
          _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      total = _mm256_add_epi32(total, c);
      // Codes are within -127..127: packing to int16 then int8 keeps them (lane order restored).
      const __m128i c16 = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + i), _mm_packs_epi16(c16, c16));
    }
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
    scale[b] = d;
    sum[b] = d * static_cast<float>(_mm_cvtsi128_si32(t));
  }
}

}  // namespace gizml::cpu::quant_kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
