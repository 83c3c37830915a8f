#pragma once
// Single-precision matrix products on the CPU.
#include <cstdint>

namespace gizml::cpu {

/// Depth of the k blocks that fix the order of additions below.
inline constexpr int64_t kGemmKc = 256;

/// C = A B (or C += A B when accumulate) for A [m, k] and B [k, n] given by element strides
/// (a transposed operand is just other strides: no copy), C [m, n] with row stride ldc.
/// Order of additions (docs/tensor.md), the same for every thread count and SIMD target: each
/// C element is an fma chain over k in increasing order within blocks of kGemmKc, starting
/// from +0; the blocks' results are then added to C in order (without accumulate, C starts as
/// the first block's result; with k == 0 it is +0).
void sgemm(int64_t m, int64_t n, int64_t k,
           const float* a, int64_t aRowStride, int64_t aColStride,
           const float* b, int64_t bRowStride, int64_t bColStride,
           float* c, int64_t ldc, bool accumulate);

/// C += A B for contiguous i64 A [m, k], B [k, n], C [m, n]: exact wrapping sums in k order.
void gemmI64(int64_t m, int64_t n, int64_t k, const int64_t* a, const int64_t* b, int64_t* c);
/// C = A B for contiguous f64 A [m, k], B [k, n], C [m, n]: each element a sum over k in
/// increasing order from +0 of the rounded products (no fma; docs/tensor.md), blocked for the
/// cache and split by rows over the thread pool.
void gemmF64(int64_t m, int64_t n, int64_t k, const double* a, const double* b, double* c);

}  // namespace gizml::cpu
