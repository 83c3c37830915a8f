// The exact-order products of F64 and I64 matrices (gemm.h), plain loops.
#include <algorithm>

#include "core/thread_pool.h"
#include "cpu/gemm.h"

namespace gizml::cpu {

void gemmI64(int64_t m, int64_t n, int64_t k, const int64_t* a, const int64_t* b, int64_t* c) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      const uint64_t av = static_cast<uint64_t>(a[i * k + p]);
      for (int64_t j = 0; j < n; ++j)
        c[i * n + j] = static_cast<int64_t>(static_cast<uint64_t>(c[i * n + j]) + av * static_cast<uint64_t>(b[p * n + j]));
    }
}

// Blocked so that a panel of B's rows (kBlockK x kBlockN doubles) stays in L2 while a block of
// A's rows goes over it; each C element still takes its k terms in increasing order.
void gemmF64(int64_t m, int64_t n, int64_t k, const double* a, const double* b, double* c) {
  constexpr int64_t kBlockM = 32, kBlockN = 256, kBlockK = 128;
  std::fill_n(c, m * n, 0.0);
  const int64_t rowBlocks = (m + kBlockM - 1) / kBlockM;
  core::parallelFor(rowBlocks, 1, [&](int64_t rb0, int64_t rb1) {
    for (int64_t i0 = rb0 * kBlockM; i0 < std::min(m, rb1 * kBlockM); i0 += kBlockM)
      for (int64_t j0 = 0; j0 < n; j0 += kBlockN)
        for (int64_t p0 = 0; p0 < k; p0 += kBlockK)
          for (int64_t i = i0; i < std::min(m, i0 + kBlockM); ++i) {
            double* ci = c + i * n;
            for (int64_t p = p0; p < std::min(k, p0 + kBlockK); ++p) {
              const double aip = a[i * k + p];
              const double* bp = b + p * n;
              for (int64_t j = j0; j < std::min(n, j0 + kBlockN); ++j) ci[j] += aip * bp[j];
            }
          }
  });
}

}  // namespace gizml::cpu
