// cpu/float_panels.h's AVX2 kernel: a step of a panel is two vectors of 8 columns (F16 widened by
// F16C, BF16 by a shift). For one or two activation rows two panels go side by side (four fma
// chains a row instead of two, which the fma's latency would bound); the accumulators stay in
// registers and each k block's result is added to out.
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

template <DType T>
inline __m256 load8(const void* panel, int64_t i) {
  if constexpr (T == DType::F16)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(panel) + i)));
  else if constexpr (T == DType::BF16)
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(panel) + i))),
        16));
  else
    return _mm256_loadu_ps(static_cast<const float*>(panel) + i);
}

// G panels (panel g at g * panelElems elements) for M rows; out holds rows of ldo floats.
template <DType T, int M, int G>
void product(const void* panel, int64_t panelElems, int64_t k, const float* x, int64_t ldx, float* out, int64_t ldo) {
  for (int64_t k0 = 0; k0 < k; k0 += kGemmKc) {
    __m256 acc[M][G][2];
    for (int r = 0; r < M; ++r)
      for (int g = 0; g < G; ++g) acc[r][g][0] = acc[r][g][1] = _mm256_setzero_ps();
    const int64_t k1 = k0 + kGemmKc < k ? k0 + kGemmKc : k;
    for (int64_t p = k0; p < k1; ++p) {
      for (int g = 0; g < G; ++g) prefetchAhead<T == DType::F32 ? 4 : 2>(panel, g, panelElems, p);
      __m256 w[G][2];
      for (int g = 0; g < G; ++g) {
        w[g][0] = load8<T>(panel, g * panelElems + p * kFloatPanelRows);
        w[g][1] = load8<T>(panel, g * panelElems + p * kFloatPanelRows + 8);
      }
      for (int r = 0; r < M; ++r) {
        const __m256 a = _mm256_set1_ps(x[r * ldx + p]);
        for (int g = 0; g < G; ++g) {
          acc[r][g][0] = _mm256_fmadd_ps(a, w[g][0], acc[r][g][0]);
          acc[r][g][1] = _mm256_fmadd_ps(a, w[g][1], acc[r][g][1]);
        }
      }
    }
    for (int r = 0; r < M; ++r)
      for (int g = 0; g < G; ++g)
        for (int v = 0; v < 2; ++v) {
          float* o = out + r * ldo + g * kFloatPanelRows + v * 8;
          _mm256_storeu_ps(o, k0 == 0 ? acc[r][g][v] : _mm256_add_ps(_mm256_loadu_ps(o), acc[r][g][v]));
        }
  }
}

template <DType T, int M>
void products(const void* panel, int64_t panels, int64_t k, const float* x, int64_t ldx, float* out) {
  const int64_t panelElems = k * kFloatPanelRows, ldo = panels * kFloatPanelRows;
  const auto* base = static_cast<const char*>(panel);
  const int64_t panelBytes = panelElems * static_cast<int64_t>(dtypeSize(T));
  int64_t g = 0;
  if constexpr (M <= 2)  // 16 registers: two panels side by side only for one or two rows
    for (; g + 2 <= panels; g += 2)
      product<T, M, 2>(base + g * panelBytes, panelElems, k, x, ldx, out + g * kFloatPanelRows, ldo);
  for (; g < panels; ++g) product<T, M, 1>(base + g * panelBytes, panelElems, k, x, ldx, out + g * kFloatPanelRows, ldo);
}

template <DType T>
void productsOf(const void* panel, int64_t panels, int64_t k, const float* x, int64_t ldx, int64_t m, float* out) {
  switch (m) {
    case 1: return products<T, 1>(panel, panels, k, x, ldx, out);
    case 2: return products<T, 2>(panel, panels, k, x, ldx, out);
    case 3: return products<T, 3>(panel, panels, k, x, ldx, out);
    default: return products<T, 4>(panel, panels, k, x, ldx, out);
  }
}

}  // namespace

void productAvx2(DType t, const void* panel, int64_t panels, int64_t k, const float* x, int64_t ldx, int64_t m,
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
