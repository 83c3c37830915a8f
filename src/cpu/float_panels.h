#pragma once
// F32, F16 and BF16 weights [rows, cols] repacked, when a layer is made, into panels of 16 rows
// stored column by column: panel p holds rows 16p .. 16p + 15 as cols steps of 16 values (a last
// panel's missing rows are zeros), so that one step is a row of B = W^T for sgemm and two SIMD
// loads for the few-rows product below, read at the stored width (F16C or a shift widens it in
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

/// y[r * ldy + j] = sum over p < k of x[r * ldx + p] * panel[p * 16 + j], for r < m (at most 4)
/// and j < cols (at most 16), in sgemm's order of additions (cpu/gemm.h): an fma chain over p
/// from +0 within each block of kGemmKc, the blocks' results added in order; the same bits on
/// every target.
void floatPanelProduct(DType t, const void* panel, int64_t k, const float* x, int64_t ldx, int64_t m, float* y,
                       int64_t ldy, int64_t cols);

/// y [rows, out] = x [rows, in] W^T for W [out, in] packed by packFloatPanels (elements of t),
/// over the thread pool, a pass reading the packed bytes once: up to 4 rows (decode) by
/// floatPanelProduct a panel a task, more by sgemm a block of 4 panels (widened to f32) a task.
/// Either way a row's outputs are sgemm's bits, whatever the rows beside it.
void floatPanelsMatmul(DType t, const uint8_t* packed, int64_t out, int64_t in, const float* x, int64_t rows,
                       float* y);

/// The kernel floatPanelProduct runs on this CPU ("avx2+fma+f16c" or "portable"), for `giz info`.
const char* floatPanelsKernel();

namespace float_panel_kernels {
/// floatPanelProduct on AVX2 + FMA + F16C, for the 16 columns into out (16 floats a row).
void productAvx2(DType t, const void* panel, int64_t k, const float* x, int64_t ldx, int64_t m, float* out);
}  // namespace float_panel_kernels

}  // namespace gizml::cpu
