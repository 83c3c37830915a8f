#pragma once
// F32, F16 and BF16 weights [rows, cols] repacked, when a layer is made, into panels of 16 rows
// stored column by column: panel p holds rows 16p .. 16p + 15 as cols steps of 16 values (a last
// panel's missing rows are zeros), so that one step is a row of B = W^T for sgemm and one or two
// SIMD loads for the few-rows product below, read at the stored width (F16C or a shift widens it in
// registers). A decode step then streams the weights once, and gives the bits sgemm gives a
// prefill (batch invariance, docs/architecture.md).
#include <gizml/dtype.h>

#include <cstdint>
#include <vector>

#include "core/page_memory.h"

namespace gizml::cpu {

inline constexpr int64_t kFloatPanelRows = 16;

/// w [rows, cols] (row-major, elements of t) as panels: ceil(rows / 16) * cols * 16 elements of t.
core::PageVector<uint8_t> packFloatPanels(DType t, const void* w, int64_t rows, int64_t cols);

/// The kernels of floatPanelProduct, lowest first: plain C++, AVX2 + FMA + F16C (256-bit), and
/// AVX-512 F (512-bit; F16 widened by vcvtph2ps, BF16 by a shift).
enum class FloatPanelKernel { Portable, Avx2, Avx512 };

/// Up to this many consecutive panels go to one call of floatPanelProduct: the SIMD kernels run
/// their fma chains side by side (one chain per 8 or 16 columns is bound by the fma's latency).
inline constexpr int64_t kFloatPanelGroup = 4;

/// y[r * ldy + j] = sum over p < k of x[r * ldx + p] * W[j][p] for r < m (at most 4) and j < cols,
/// where W's rows are those of `panels` (1 to kFloatPanelGroup) consecutive panels of depth k
/// starting at `panel` (cols at most 16 * panels), in sgemm's order of additions (cpu/gemm.h): an
/// fma chain over p from +0 within each block of kGemmKc, the blocks' results added in order; the
/// same bits from every kernel.
void floatPanelProduct(DType t, const void* panel, int64_t panels, int64_t k, const float* x, int64_t ldx, int64_t m,
                       float* y, int64_t ldy, int64_t cols);
/// The same by a given kernel (which this CPU must run: floatPanelKernelRuns), for tests.
void floatPanelProduct(FloatPanelKernel kernel, DType t, const void* panel, int64_t panels, int64_t k, const float* x,
                       int64_t ldx, int64_t m, float* y, int64_t ldy, int64_t cols);
bool floatPanelKernelRuns(FloatPanelKernel kernel);
/// The kernel's name as `giz info` prints it ("avx512f", "avx2+fma+f16c", "portable").
const char* floatPanelKernelName(FloatPanelKernel kernel);

/// y [rows, out] = x [rows, in] W^T for W [out, in] packed by packFloatPanels (elements of t),
/// over the thread pool, a pass reading the packed bytes once: up to 4 rows (decode) by
/// floatPanelProduct kFloatPanelGroup panels a task, more by sgemm a block of 4 panels (widened to f32) a task.
/// Either way a row's outputs are sgemm's bits, whatever the rows beside it.
void floatPanelsMatmul(DType t, const uint8_t* packed, int64_t out, int64_t in, const float* x, int64_t rows,
                       float* y);

/// The name of the kernel floatPanelProduct runs on this CPU, for `giz info`.
const char* floatPanelsKernel();

namespace float_panel_kernels {
/// The SIMD kernels ask for each panel's stream this many steps (2 KiB of F16) ahead: a panel
/// crosses a 4 KiB page every 128 steps of F16, where the hardware's prefetchers stop. One Zen 5
/// thread's 16-bit decode of the Qwen3-0.6B-shaped model went from 26.5-27.9 to 29.1-29.9 tok/s
/// (32 steps ahead: 27.1-28.9; 128: 25.5-25.9; into L2 only: 27.4-28.0).
inline constexpr int64_t kPrefetchSteps = 64;

/// Prefetches panel g's step p + kPrefetchSteps once per cache line (steps of 32 or 64 bytes).
template <int64_t ElemBytes>
inline void prefetchAhead(const void* panel, int64_t g, int64_t panelElems, int64_t p) {
  if (p % (64 / (kFloatPanelRows * ElemBytes)) == 0)
    __builtin_prefetch(static_cast<const char*>(panel) + (g * panelElems + (p + kPrefetchSteps) * kFloatPanelRows) * ElemBytes, 0, 3);
}

/// floatPanelProduct's SIMD kernels, writing `panels` * 16 columns a row into out (m rows of
/// panels * 16 floats).
void productAvx2(DType t, const void* panel, int64_t panels, int64_t k, const float* x, int64_t ldx, int64_t m,
                 float* out);
void productAvx512(DType t, const void* panel, int64_t panels, int64_t k, const float* x, int64_t ldx, int64_t m,
                   float* out);
}  // namespace float_panel_kernels

}  // namespace gizml::cpu
