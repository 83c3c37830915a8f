// cpu::sgemm beside OpenBLAS's cblas_sgemm on the same thread count, row-major operands.
// Prints GFLOP/s for each (best of alternating runs after a warm-up) and the ratio ours/OpenBLAS.
#include <cblas.h>
#include <gizml/cpu.h>
#include <gizml/gemm.h>
#include <gizml/threads.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "best_of_alternating.h"

int main() {
  using gizml::cpu::sgemm;
  const int threads = gizml::core::threadCount();
  openblas_set_num_threads(threads);
  std::printf("threads %d, our SIMD target %s, OpenBLAS core %s\n", threads, gizml::cpu::simdTarget(),
              openblas_get_corename());
  std::printf("%-20s %12s %12s %8s\n", "m x k x n", "ours GF/s", "OpenBLAS", "ratio");
  struct Shape {
    int64_t m, k, n;
  };
  const Shape shapes[] = {{256, 256, 256},  {1024, 1024, 1024}, {2048, 2048, 2048},
                          {4096, 4096, 4096}, {1, 4096, 4096}, {512, 4096, 11008}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const Shape& s : shapes) {
    std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.k * s.n)),
        c(static_cast<size_t>(s.m * s.n));
    for (auto& v : a) v = dist(rng);
    for (auto& v : b) v = dist(rng);
    const auto [ours, theirs] = bestSeconds(
        [&] { sgemm(s.m, s.n, s.k, a.data(), s.k, 1, b.data(), s.n, 1, c.data(), s.n, false); },
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(s.m), int(s.n), int(s.k), 1.0f, a.data(),
                      int(s.k), b.data(), int(s.n), 0.0f, c.data(), int(s.n));
        },
        3, 1.0);
    const double flops = 2.0 * double(s.m) * double(s.n) * double(s.k);
    char name[32];
    std::snprintf(name, sizeof name, "%ldx%ldx%ld", long(s.m), long(s.k), long(s.n));
    std::printf("%-20s %12.1f %12.1f %8.2f\n", name, flops / ours * 1e-9, flops / theirs * 1e-9, theirs / ours);
    std::fflush(stdout);
  }
}
