#pragma once
// The single-precision matrix product on the CPU, BLAS's sgemm with row and column strides: what
// the tensors' f32 matmul runs, in one order of additions on every CPU and thread count.
#include <cstdint>

namespace gizml::cpu {

/// Depth of the k blocks that fix the order of additions below.
inline constexpr int64_t kGemmKc = 256;

/// C = A B (or C += A B when accumulate) for A [m, k] and B [k, n] given by element strides
/// (a transposed operand is just other strides: no copy), C [m, n] with row stride ldc; blocks
/// of C go to the thread pool's threads (gizml/threads.h) unless the product is small.
/// Order of additions (docs/tensor.md), the same for every thread count and SIMD target: each
/// C element is an fma chain over k in increasing order within blocks of kGemmKc, starting
/// from +0; the blocks' results are then added to C in order (without accumulate, C starts as
/// the first block's result; with k == 0 it is +0).
void sgemm(int64_t m, int64_t n, int64_t k,
           const float* a, int64_t aRowStride, int64_t aColStride,
           const float* b, int64_t bRowStride, int64_t bColStride,
           float* c, int64_t ldc, bool accumulate);

}  // namespace gizml::cpu
