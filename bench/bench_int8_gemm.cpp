// T::intMatmul on the CPU (ConvRot's W8A8 product: int8 activations times a linear's INT8 weight
// codes, read as stored [n, k] rows) at the shapes given, or the DiT linears' shapes by default;
// best seconds of `runs` after a warm-up, as GOP/s. Its anchor, torch._int_mm (oneDNN), runs
// beside it in bench_int8_gemm.py, which alternates the two and prints the ratio.
//
//   bench_int8_gemm [M K N ...] [--runs R]
#include <gizml/tensor.h>
#include <gizml/threads.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "best_of_alternating.h"

namespace T = gizml::tensor;

int main(int argc, char** argv) {
  std::vector<int64_t> dims;
  int runs = 3;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = std::atoi(argv[++i]);
    else dims.push_back(std::atoll(argv[i]));
  }
  if (dims.empty()) dims = {4096, 3072, 3072, 4096, 3072, 12288, 256, 5376, 5376, 1024, 14336, 5376};
  if (dims.size() % 3 != 0 || runs < 1) {
    std::fprintf(stderr, "usage: bench_int8_gemm [M K N ...] [--runs R]\n");
    return 2;
  }
  std::printf("threads %d\n%-22s %10s %10s\n", gizml::core::threadCount(), "m x k x n", "seconds", "GOP/s");
  std::mt19937 rng(1);
  for (size_t s = 0; s < dims.size(); s += 3) {
    const int64_t m = dims[s], k = dims[s + 1], n = dims[s + 2];
    T::Tensor a = T::empty({m, k}, gizml::DType::I8), w = T::empty({n, k}, gizml::DType::I8);
    for (T::Tensor* t : {&a, &w})
      for (int64_t i = 0; i < t->numel(); ++i) t->data<int8_t>()[i] = static_cast<int8_t>(rng());
    const T::Tensor b = w.transpose(0, 1);  // [k, n]: the stored rows read in place
    T::intMatmul(a, b);
    double best = 1e30;
    for (int r = 0; r < runs; ++r) {
      const double t0 = wallClock();
      T::intMatmul(a, b);
      best = std::min(best, wallClock() - t0);
    }
    char name[48];
    std::snprintf(name, sizeof name, "%ldx%ldx%ld", long(m), long(k), long(n));
    std::printf("%-22s %10.5f %10.1f\n", name, best, 2.0 * double(m) * double(k) * double(n) / best * 1e-9);
    std::fflush(stdout);
  }
}
