// netops on the GPU beside their anchors. lazyConv 3x3 pad 1 in BF16 (the implicit GEMM on
// tensor cores) at a VAE decoder's shapes, in TFLOP/s: scripts/device-check.sh runs
// torch.nn.functional.conv2d (cuDNN, BF16) on the same shapes and prints the ratios. The row
// kernels (modulatedNormInto, pixelNormInto, int8RowsInto) in GB/s of the bytes they must move,
// beside a device-to-device copy in the same run. Medians of CUDA-event timings after a warm-up
// (which compiles the kernels). Without a GPU it says so and exits 0; `--quick`: small shapes.
#include <gizhw/gpu.h>
#include <gizml/netops_rows.h>

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpu_timing.h"

using namespace gizml;
namespace gpu = gizhw::gpu;
namespace N = gizml::netops;

int main(int argc, char** argv) {
  auto g = benchmarkGpu("bench_netops_gpu");
  if (!g) return 0;
  const bool quick = quickRun(argc, argv);

  // VAE decoder convolutions: channels x (height x width), 3x3 pad 1, channels in = out.
  struct Conv {
    int64_t c, h, w;
  };
  const std::vector<Conv> convs = quick ? std::vector<Conv>{{32, 16, 16}}
                                        : std::vector<Conv>{{512, 64, 64}, {512, 128, 128}, {256, 256, 256}, {128, 512, 512}};
  for (const Conv& c : convs) {
    const auto w = T::normal(T::Key(1), {c.c, c.c * 9}).mul(T::scalar(0.02)).cast(DType::BF16).on(*g);
    const auto x = T::normal(T::Key(2), {c.c, c.h, c.w}).cast(DType::BF16).on(*g);
    T::Tensor y;
    const double ms = medianMs(*g, 10, [&] { y = N::lazyConv(w, x, 3, 3, 1, DType::BF16).eval(); });
    const double tflops = 2.0 * c.c * c.c * 9 * c.h * c.w / ms * 1e-9;
    std::printf("lazyConv 3x3 bf16 %4lld ch %4lldx%-4lld %9.3f ms  %7.1f TFLOP/s\n", static_cast<long long>(c.c),
                static_cast<long long>(c.h), static_cast<long long>(c.w), ms, tflops);
    std::printf("RESULT lazyconv_c%lld_%lldx%lld_tflops %.2f\n", static_cast<long long>(c.c), static_cast<long long>(c.h),
                static_cast<long long>(c.w), tflops);
  }

  // Row kernels over [rows, width] against a copy of x's bytes.
  const int64_t rows = quick ? 64 : 32768, width = quick ? 512 : 4096;
  const auto x = T::normal(T::Key(3), {rows, width}).on(*g);  // F32, as the modulated norms take it
  auto copy = g->allocate(static_cast<size_t>(rows * width * 4));
  const double copyMs = medianMs(*g, 20, [&] {
    g->copyOnDevice(copy.address(), x.storage()->deviceAddress(), static_cast<size_t>(rows * width * 4), g->stream());
  });
  const double copyGBs = 2.0 * rows * width * 4 / copyMs / 1e6;
  std::printf("anchor: device-to-device copy of [%lld, %lld] F32 %9.3f ms  %8.1f GB/s\n", static_cast<long long>(rows),
              static_cast<long long>(width), copyMs, copyGBs);
  const auto ones = T::ones({width}).on(*g), mod = T::zeros({4, width}).on(*g);
  const auto map = T::zeros({rows}).on(*g);
  const auto yBf16 = T::zeros({rows, width}, DType::BF16).on(*g);
  const auto q = T::zeros({rows, width}, DType::I8).on(*g), s = T::zeros({rows, 1}).on(*g);
  const auto xBf16 = x.cast(DType::BF16);
  const auto pixels = xBf16.reshape({rows / 64, 64, width});
  struct Row {
    const char* name;
    double bytes;  // read + written
    std::function<void()> run;
  };
  const std::vector<Row> kernels = {
      {"modulatedNormInto f32 -> bf16", rows * width * 6.0, [&] { N::modulatedNormInto(x, ones, mod, mod, map, 1e-6, yBf16); }},
      {"pixelNormInto bf16 in place", rows * width * 4.0, [&] { N::pixelNormInto(pixels, 1e-6, true, pixels); }},
      {"int8RowsInto bf16 -> i8", rows * width * 3.0, [&] { N::int8RowsInto(xBf16, q, s); }},
      {"modulatedInt8RowsInto f32 -> i8", rows * width * 5.0,
       [&] { N::modulatedInt8RowsInto(x, ones, mod, mod, map, 1e-6, std::nullopt, q, s); }}};
  for (const Row& k : kernels) {
    const double ms = medianMs(*g, 10, k.run);
    const double gbs = k.bytes / ms / 1e6;
    std::printf("%-34s %9.3f ms  %8.1f GB/s  ratio to copy %.2f\n", k.name, ms, gbs, gbs / copyGBs);
    std::string key = k.name;
    key = key.substr(0, key.find(' '));
    std::printf("RESULT %s_ratio_to_copy %.3f\n", key.c_str(), gbs / copyGBs);
  }
  return 0;
}
