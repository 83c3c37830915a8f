// F16 runs widened to f32 by F16C, 8 at a time (loadF32's path for contiguous F16 where the CPU
// has it: KV caches read every decode step). F16 to F32 is exact either way; the scalar
// halfToFloat finishes a run's last few.
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

}  // namespace gizml::cpu::convert_kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
