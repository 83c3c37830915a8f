#pragma once
// Matrix products on the CPU: the f32 one (sgemm and its order of additions, kGemmKc) is public
// in gizml/gemm.h; the exact i64 and f64 ones here.
#include <gizml/gemm.h>

#include <cstdint>
#include <functional>

namespace gizml::cpu {

/// Fills `out` as gemm::packB does with the block of B of rows [p0, p0 + kc) and columns
/// [j0, j0 + nc): nr-column panels (nr = gemm::tile().nr, j0 a multiple of it), each kc steps of
/// nr values, the last zero-padded past nc.
using PackingB = std::function<void(int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* out)>;
/// sgemm's C = A B with B given by what packs its blocks: for a B kept in another layout (16-bit
/// panels), packed straight from it instead of through an f32 copy. The same bits as sgemm on
/// that B.
void sgemmPackingB(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs, const PackingB& packB,
                   float* c, int64_t ldc);

/// C += A B for contiguous i64 A [m, k], B [k, n], C [m, n]: exact wrapping sums in k order.
void gemmI64(int64_t m, int64_t n, int64_t k, const int64_t* a, const int64_t* b, int64_t* c);
/// C = A B for contiguous f64 A [m, k], B [k, n], C [m, n]: each element a sum over k in
/// increasing order from +0 of the rounded products (no fma; docs/tensor.md), blocked for the
/// cache and split by rows over the thread pool.
void gemmF64(int64_t m, int64_t n, int64_t k, const double* a, const double* b, double* c);

}  // namespace gizml::cpu
