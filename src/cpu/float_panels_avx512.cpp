// cpu/float_panels.h's AVX-512 kernel: a step of a panel is one 512-bit vector of its 16 columns
// (F16 widened by vcvtph2ps, BF16 by a shift), and all the panels of a call (up to 4) go side by
// side, so that each activation row runs up to four independent fma chains (one chain a panel
// would wait on the fma's latency). Accumulators stay in registers (4 rows x 4 panels + 4 weight
// vectors of the 32); each k block's result is added to out.
//
// AVX512-BF16's vdpbf16ps is not used: it rounds the activations to BF16 and adds products in
// pairs, which would give other bits than sgemm's f32 fma chain, and the decode it would serve
// reads memory, not arithmetic, at these shapes.
#include <immintrin.h>

#include "cpu/float_panels.h"
#include "cpu/gemm.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f"))), apply_to = function)
#else
#pragma GCC target("avx2,fma,f16c,avx512f")
// GCC 12's AVX-512 headers make their "undefined" vectors as `__m512i y = y;`, which -Wall
// reports at every inlined use (a false positive of the headers, not of this code).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace gizml::cpu::float_panel_kernels {
namespace {

template <DType T>
inline __m512 load16(const void* panel, int64_t i) {
  if constexpr (T == DType::F16)
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(panel) + i)));
  else if constexpr (T == DType::BF16)
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(panel) + i))),
        16));
  else
    return _mm512_loadu_ps(static_cast<const float*>(panel) + i);
}

template <DType T, int M, int G>
void product(const void* panel, int64_t k, const float* x, int64_t ldx, float* out) {
  const int64_t panelElems = k * kFloatPanelRows;
  for (int64_t k0 = 0; k0 < k; k0 += kGemmKc) {
    __m512 acc[M][G];
    for (int r = 0; r < M; ++r)
      for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
    const int64_t k1 = k0 + kGemmKc < k ? k0 + kGemmKc : k;
    for (int64_t p = k0; p < k1; ++p) {
      for (int g = 0; g < G; ++g) prefetchAhead<T == DType::F32 ? 4 : 2>(panel, g, panelElems, p);
      __m512 w[G];
      for (int g = 0; g < G; ++g) w[g] = load16<T>(panel, g * panelElems + p * kFloatPanelRows);
      for (int r = 0; r < M; ++r) {
        const __m512 a = _mm512_set1_ps(x[r * ldx + p]);
        for (int g = 0; g < G; ++g) acc[r][g] = _mm512_fmadd_ps(a, w[g], acc[r][g]);
      }
    }
    for (int r = 0; r < M; ++r)
      for (int g = 0; g < G; ++g) {
        float* o = out + (r * G + g) * kFloatPanelRows;
        _mm512_storeu_ps(o, k0 == 0 ? acc[r][g] : _mm512_add_ps(_mm512_loadu_ps(o), acc[r][g]));
      }
  }
}

template <DType T, int M>
void productsOf(const void* panel, int64_t panels, int64_t k, const float* x, int64_t ldx, float* out) {
  switch (panels) {
    case 1: return product<T, M, 1>(panel, k, x, ldx, out);
    case 2: return product<T, M, 2>(panel, k, x, ldx, out);
    case 3: return product<T, M, 3>(panel, k, x, ldx, out);
    default: return product<T, M, 4>(panel, k, x, ldx, out);
  }
}

template <DType T>
void productsOf(const void* panel, int64_t panels, int64_t k, const float* x, int64_t ldx, int64_t m, float* out) {
  switch (m) {
    case 1: return productsOf<T, 1>(panel, panels, k, x, ldx, out);
    case 2: return productsOf<T, 2>(panel, panels, k, x, ldx, out);
    case 3: return productsOf<T, 3>(panel, panels, k, x, ldx, out);
    default: return productsOf<T, 4>(panel, panels, k, x, ldx, out);
  }
}

}  // namespace

void productAvx512(DType t, const void* panel, int64_t panels, int64_t k, const float* x, int64_t ldx, int64_t m,
                   float* out) {
  switch (t) {
    case DType::F16: return productsOf<DType::F16>(panel, panels, k, x, ldx, m, out);
    case DType::BF16: return productsOf<DType::BF16>(panel, panels, k, x, ldx, m, out);
    default: return productsOf<DType::F32>(panel, panels, k, x, ldx, m, out);
  }
}

}  // namespace gizml::cpu::float_panel_kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
