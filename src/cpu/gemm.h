#pragma once
// Matrix products on the CPU: the f32 one (sgemm and its order of additions, kGemmKc) is public
// in gizml/gemm.h; the exact i64 and f64 ones here.
#include <gizml/gemm.h>

#include <cstdint>

namespace gizml::cpu {

/// C += A B for contiguous i64 A [m, k], B [k, n], C [m, n]: exact wrapping sums in k order.
void gemmI64(int64_t m, int64_t n, int64_t k, const int64_t* a, const int64_t* b, int64_t* c);
/// C = A B for contiguous f64 A [m, k], B [k, n], C [m, n]: each element a sum over k in
/// increasing order from +0 of the rounded products (no fma; docs/tensor.md), blocked for the
/// cache and split by rows over the thread pool.
void gemmF64(int64_t m, int64_t n, int64_t k, const double* a, const double* b, double* c);

}  // namespace gizml::cpu
