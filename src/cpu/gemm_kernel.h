#pragma once
// The SIMD halves of sgemm (gemm_kernel_simd.cpp), chosen at run time for the CPU. Both follow
// the order of additions documented in gemm.h, so any target gives the same bits.
#include <cstdint>

namespace gizml::cpu::gemm {

/// Register tile of the micro-kernel: mr rows of C by nr columns.
struct Tile {
  int64_t mr, nr;
};
Tile tile();

/// mc rows of A (kc deep, any strides) into mr-row panels, each kc steps of mr values.
void packA(const float* a, int64_t ars, int64_t acs, int64_t mc, int64_t kc, float* out);

/// nc columns of B (kc deep, any strides) into nr-column panels, each kc steps of nr values;
/// the last panel is zero-padded past nc.
void packB(const float* b, int64_t brs, int64_t bcs, int64_t kc, int64_t nc, float* out);

/// C [mc, nc] (row stride ldc) = packed A times packed B, or C += it when add.
void macroKernel(int64_t mc, int64_t nc, int64_t kc, const float* packedA, const float* packedB,
                 float* c, int64_t ldc, bool add);

/// Rows of C no wider than this take the streaming path.
inline constexpr int64_t kStreamRows = 4;

/// sgemm for m <= kStreamRows and a B with unit column stride, read in place: B streams once
/// through the cache, row by row, at memory bandwidth.
void streamRows(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs,
                const float* b, int64_t brs, float* c, int64_t ldc, bool accumulate);

}  // namespace gizml::cpu::gemm
