// F16 runs widened to f32 and f32 runs rounded to F16 by F16C, 8 at a time (loadF32's and
// storeF32's paths for contiguous F16 where the CPU has it: KV caches read every decode step and
// written by every row). F16 to F32 is exact either way, and vcvtps2ph rounding to nearest even
// gives floatToHalf's bits; the scalar functions finish a run's last few.
#include <immintrin.h>

#include "cpu/convert.h"

// After the headers, so that shared inline functions are not compiled for F16C.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx,f16c"))), apply_to = function)
#else
#pragma GCC target("avx,f16c")
#endif

namespace gizml::cpu::convert_kernels {

void widenHalfF16c(const uint16_t* in, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i) out[i] = halfToFloat(in[i]);
}

void narrowHalfF16c(const float* in, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) out[i] = floatToHalf(in[i]);
}

}  // namespace gizml::cpu::convert_kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
