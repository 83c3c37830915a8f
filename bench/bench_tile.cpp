// The guide's `product` tile program (128 x 128 output blocks, k in blocks of 32) through
// Tile::run on host F32 tensors, beside OpenBLAS's cblas_sgemm on the same data and thread count.
// Prints GFLOP/s for each (best of alternating runs after a warm-up) and the ratio ours/OpenBLAS.
// The program's time includes what Tile::run does on every call: tracing the body and the
// zeroed output tensor it writes.
#include <cblas.h>
#include <gizml/cpu.h>
#include <gizml/threads.h>
#include <gizml/tile.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <string>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <utility>
#include <vector>

#include "best_of_alternating.h"

using namespace gizml;

namespace {

// The guide's product (docs/tile.md, examples/03_tile.cpp).
T::Tensor product(const T::Tensor& a, const T::Tensor& b, int64_t m, int64_t n) {
  return Tile::run({Tile::cdiv(m, 128), Tile::cdiv(n, 128)}, [&](Tile::Program& p) {
    const auto i = p.id(0), j = p.id(1);
    const auto A = p.read(a, {128, 32}), B = p.read(b, {32, 128});
    const auto acc = p.fold(p.index(0), A.blocks(1), p.zeros({128, 128}),
                            [&](Tile::Index k, Tile::Tile acc) { return acc + A.at({i, k}).dot(B.at({k, j})); });
    p.write(T::zeros({m, n}), {128, 128}).put(acc, {i, j});
  })[0];
}

// Wall time, or with `cpu` the process's CPU time (best_of_alternating.h).
bool cpuTime = false;

}  // namespace

// Usage: bench_tile [SECONDS [cpu]]: the time spent on each shape (default 2; more gives a busy
// machine more chances at a quiet moment); `cpu` times CPU time instead of wall time.
// GIZML_THREADS sets the thread count of both.
int main(int argc, char** argv) {
  const double budget = argc > 1 ? std::atof(argv[1]) : 2.0;
  cpuTime = argc > 2 && std::string(argv[2]) == "cpu";
  const int threads = core::threadCount();
  openblas_set_num_threads(threads);
  std::printf("threads %d, our SIMD target %s, OpenBLAS core %s, %s time\n", threads, cpu::simdTarget(),
              openblas_get_corename(), cpuTime ? "CPU" : "wall");
  std::printf("%-20s %12s %12s %8s %10s\n", "m x k x n", "tile GF/s", "OpenBLAS", "ratio", "max diff");
  struct Shape {
    int64_t m, k, n;
  };
  const Shape shapes[] = {{512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048}, {1000, 333, 777}};
  for (const Shape& s : shapes) {
    const auto a = T::uniform(T::Key(1), {s.m, s.k}, -1, 1), b = T::uniform(T::Key(2), {s.k, s.n}, -1, 1);
    std::vector<float> c(static_cast<size_t>(s.m * s.n));
    T::Tensor got;
    const auto [ours, theirs] = bestSeconds([&] { got = product(a, b, s.m, s.n); },
                                            [&] {
                                              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(s.m),
                                                          int(s.n), int(s.k), 1.0f, a.data<float>(), int(s.k),
                                                          b.data<float>(), int(s.n), 0.0f, c.data(), int(s.n));
                                            },
                                            5, budget, cpuTime ? cpuClock : wallClock);
    // The two agree up to the order of additions.
    double diff = 0;
    const float* g = got.data<float>();
    for (size_t i = 0; i < c.size(); ++i) diff = std::max(diff, double(std::fabs(g[i] - c[i])));
    const double flops = 2.0 * double(s.m) * double(s.n) * double(s.k);
    char name[32];
    std::snprintf(name, sizeof name, "%ldx%ldx%ld", long(s.m), long(s.k), long(s.n));
    std::printf("%-20s %12.1f %12.1f %8.2f %10.1e\n", name, flops / ours * 1e-9, flops / theirs * 1e-9,
                theirs / ours, diff);
    std::fflush(stdout);
  }
}
