// A plain blocked sgemm: correct for every stride; the fast kernel replaces its inner loops.
#include "cpu/gemm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"

namespace gizml::cpu {

namespace {
constexpr int64_t kGemmKc = 256;
}

void sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs, const float* b,
           int64_t brs, int64_t bcs, float* c, int64_t ldc, bool accumulate) {
  core::parallelFor(m, 4, [&](int64_t r0, int64_t r1) {
    std::vector<float> acc(static_cast<size_t>(n));
    for (int64_t i = r0; i < r1; ++i) {
      float* crow = c + i * ldc;
      if (!accumulate) std::fill_n(crow, n, 0.0f);
      for (int64_t k0 = 0; k0 < k; k0 += kGemmKc) {
        const int64_t k1 = std::min(k, k0 + kGemmKc);
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t p = k0; p < k1; ++p) {
          const float av = a[i * ars + p * acs];
          const float* brow = b + p * brs;
          for (int64_t j = 0; j < n; ++j) acc[j] = std::fma(av, brow[j * bcs], acc[j]);
        }
        for (int64_t j = 0; j < n; ++j) crow[j] += acc[j];
      }
    }
  });
}

}  // namespace gizml::cpu
