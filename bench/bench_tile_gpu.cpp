// The guide's product as a tile program on the GPU: BF16 [n, n] x [n, n] in 128 x 128 blocks with
// k blocks of 32 (tensor cores; 1 and 3 stages), in TFLOP/s; scripts/device-check.sh runs
// torch.matmul beside it for the ratio. Times are medians of CUDA-event timings after a warm-up
// (which compiles the kernel). Without a GPU it says so and exits 0.
#include <gizhw/gpu.h>
#include <gizml/tile.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gpu_timing.h"

using namespace gizml;
namespace gpu = gizhw::gpu;

int main(int argc, char** argv) {
  auto g = gpu::open();
  if (!g) {
    std::printf("bench_tile_gpu: no GPU found, nothing to measure\n");
    return 0;
  }
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  std::printf("device: %s\n", g->describe().c_str());
  for (int64_t n : quick ? std::vector<int64_t>{1024} : std::vector<int64_t>{4096, 8192}) {
    const auto a = T::normal(T::Key(3), {n, n}).cast(DType::BF16).on(*g);
    const auto b = T::normal(T::Key(4), {n, n}).cast(DType::BF16).on(*g);
    const auto c = T::zeros({n, n}, DType::BF16).on(*g);  // written in place: no copy in the timing
    for (int stages : {1, 3}) {
      const auto body = [&](Tile::Program& p) {
        p.stages(stages);
        const auto i = p.id(0), j = p.id(1);
        const auto A = p.read(a, {128, 32}), B = p.read(b, {32, 128});
        const auto acc = p.fold(p.index(0), A.blocks(1), p.zeros({128, 128}),
                                [&](Tile::Index k, Tile::Tile acc) { return acc + A.at({i, k}).dot(B.at({k, j})); });
        p.write(c, {128, 128}).put(acc, {i, j});
      };
      const Tile::Grid grid = {Tile::cdiv(n, 128), Tile::cdiv(n, 128)};
      // The host's part of a run (trace, generate the source, look it up): inside the timing below.
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < 20; ++r) (void)Tile::cuda(grid, body);
      const double hostMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 20;
      std::printf("tile product: trace + generate %.3f ms a run\n", hostMs);
      // Five runs a timing, so that the host's part of one overlaps the GPU's work of the last.
      const double ms = medianMs(*g, 10, [&] {
        for (int r = 0; r < 5; ++r) Tile::run(grid, body);
      }) / 5;
      const double tflops = 2.0 * n * n * n / ms / 1e9;
      std::printf("tile product bf16 %-6lld %d stage%s %9.3f ms  %8.1f TFLOP/s\n", static_cast<long long>(n), stages,
                  stages == 1 ? " " : "s", ms, tflops);
      std::printf("RESULT tile_matmul_bf16_%lld_stages%d_tflops %.2f\n", static_cast<long long>(n), stages, tflops);
    }
    // The same product by T::matmul (the fixed tensor-core kernel), for reference.
    T::Tensor d;
    const double ms = medianMs(*g, 10, [&] { d = a.matmul(b); });
    std::printf("RESULT tile_reference_matmul_bf16_%lld_tflops %.2f\n", static_cast<long long>(n), 2.0 * n * n * n / ms / 1e9);
  }
  return 0;
}
