// attentionRows (BF16 tensor cores, and the 8-bit path where the GPU has it) and neighborhood3d on
// the GPU, in TFLOP/s of the attention's two products (4 n^2 heads head for full attention). No
// anchor runs in this program: scripts/device-check.sh runs torch's scaled_dot_product_attention
// (flash backend) on the same shapes beside it and prints the ratios. Times are medians of CUDA-event timings after a warm-up (which
// compiles the kernels). Without a GPU it says so and exits 0; `--quick` runs the small shapes.
#include <gizhw/gpu.h>
#include <gizml/netops_rows.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gpu_timing.h"

using namespace gizml;
namespace gpu = gizhw::gpu;
namespace N = gizml::netops;

int main(int argc, char** argv) {
  auto g = benchmarkGpu("bench_attention_rows");
  if (!g) return 0;
  const bool quick = quickRun(argc, argv);
  const int64_t heads = quick ? 2 : 24;
  for (int64_t head : {int64_t{64}, int64_t{128}}) {
    for (int64_t n : quick ? std::vector<int64_t>{256} : std::vector<int64_t>{1024, 4096, 16384}) {
      const auto qkv = T::normal(T::Key(1), {n, 3 * heads * head}).cast(DType::BF16).on(*g);
      const auto out = T::zeros({n, heads * head}, DType::BF16).on(*g);
      const double flops = 4.0 * static_cast<double>(n) * n * heads * head;
      for (bool quantized : {false, true}) {
        const double ms = medianMs(*g, 10, [&] { N::attentionRows(qkv, heads, head, quantized, 0, out); });
        std::printf("attentionRows %s heads %lld x %lld, n %lld: %.3f ms, %.1f TFLOP/s\n",
                    quantized ? "8-bit" : "BF16 ", static_cast<long long>(heads), static_cast<long long>(head),
                    static_cast<long long>(n), ms, flops / ms * 1e-9);
        std::printf("RESULT attention_rows_%s_h%lld_n%lld_tflops %.2f\n", quantized ? "int8" : "bf16",
                    static_cast<long long>(head), static_cast<long long>(n), flops / ms * 1e-9);
      }
    }
  }
  // A video latent's neighborhood attention: 8 x 32 x 32 positions, windows 3 x 7 x 7.
  const std::vector<int64_t> grid = quick ? std::vector<int64_t>{2, 8, 8} : std::vector<int64_t>{8, 32, 32};
  const std::vector<int64_t> kernel = {3, 7, 7};
  const int64_t positions = grid[0] * grid[1] * grid[2], head = 128;
  const auto qkv = T::normal(T::Key(2), {positions, 3 * heads * head}).cast(DType::BF16).on(*g);
  const double ms = medianMs(*g, 10, [&] { (void)N::neighborhood3d(qkv, grid, kernel, heads, 0.088); });
  const double keys = 3.0 * 7 * 7;
  std::printf("neighborhood3d %lldx%lldx%lld, kernel 3x7x7, heads %lld x 128: %.3f ms, %.1f TFLOP/s (window keys only)\n",
              static_cast<long long>(grid[0]), static_cast<long long>(grid[1]), static_cast<long long>(grid[2]),
              static_cast<long long>(heads), ms, 4.0 * positions * keys * heads * head / ms * 1e-9);
  return 0;
}
