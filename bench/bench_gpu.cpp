// GPU benchmarks, each beside its anchor in the same run: an elementwise chain and reductions
// against a device-to-device copy of the same bytes (the memory-bound ceiling), and BF16 matmul
// in TFLOP/s and the INT8 product in TOP/s (scripts/device-check.sh runs torch.matmul and
// torch._int_mm beside them for the ratios). Times are
// medians of CUDA-event timings after a warm-up. Without a GPU it says so and exits 0.
#include <gizhw/gpu.h>
#include <gizml/tensor.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "gpu_timing.h"

using namespace gizml;
namespace gpu = gizhw::gpu;

int main(int argc, char** argv) {
  auto g = benchmarkGpu("bench_gpu");
  if (!g) return 0;
  const bool quick = quickRun(argc, argv);
  const int64_t n = quick ? (int64_t{1} << 24) : (int64_t{1} << 28);  // 1 GiB of f32 (64 MiB quick)
  const auto x = T::uniform(T::Key(1), {n}, -1, 1).on(*g), y = T::uniform(T::Key(2), {n}, -1, 1).on(*g);
  g->synchronize();
  auto copy = g->allocate(static_cast<size_t>(n) * 4);
  const double copyMs = medianMs(*g, 20, [&] {
    g->copyOnDevice(copy.address(), x.storage()->deviceAddress(), static_cast<size_t>(n) * 4, g->stream());
  });
  const double copyGBs = 2.0 * n * 4 / copyMs / 1e6;  // read + write
  std::printf("%-34s %9.3f ms  %8.1f GB/s\n", "anchor: device-to-device copy", copyMs, copyGBs);

  T::Tensor out;
  const double chainMs = medianMs(*g, 20, [&] {
    out = ((T::lazy(x) * 2.0 + T::lazy(y)).relu() - 0.25).mul(T::lazy(x)).abs().sqrt().add(1.0).eval();
  });
  const double chainGBs = 3.0 * n * 4 / chainMs / 1e6;  // two reads, one write
  std::printf("%-34s %9.3f ms  %8.1f GB/s  ratio to copy %.2f\n", "elementwise chain (8 ops, f32)", chainMs, chainGBs,
              chainGBs / copyGBs);
  T::Tensor s;
  const double sumMs = medianMs(*g, 20, [&] { s = x.sum(); });
  const double sumGBs = 1.0 * n * 4 / sumMs / 1e6;
  std::printf("%-34s %9.3f ms  %8.1f GB/s  ratio to copy %.2f\n", "sum (f32, CPU order)", sumMs, sumGBs, sumGBs / copyGBs);
  const auto rows = x.reshape({n / 4096, 4096});
  const double rowMs = medianMs(*g, 20, [&] { s = rows.sum({1}); });
  const double rowGBs = 1.0 * n * 4 / rowMs / 1e6;
  std::printf("%-34s %9.3f ms  %8.1f GB/s  ratio to copy %.2f\n", "row sums [n/4096, 4096]", rowMs, rowGBs, rowGBs / copyGBs);
  const double maxMs = medianMs(*g, 20, [&] { s = rows.max({1}); });
  const double maxGBs = 1.0 * n * 4 / maxMs / 1e6;
  std::printf("%-34s %9.3f ms  %8.1f GB/s  ratio to copy %.2f\n", "row max [n/4096, 4096]", maxMs, maxGBs, maxGBs / copyGBs);

  for (int64_t size : quick ? std::vector<int64_t>{1024} : std::vector<int64_t>{4096, 8192}) {
    const auto a = T::normal(T::Key(3), {size, size}).cast(DType::BF16).on(*g);
    const auto b = T::normal(T::Key(4), {size, size}).cast(DType::BF16).on(*g);
    T::Tensor c;
    const double ms = medianMs(*g, 10, [&] { c = a.matmul(b); });
    const double tflops = 2.0 * size * size * size / ms / 1e9;
    std::printf("matmul bf16 %-22lld %9.3f ms  %8.1f TFLOP/s\n", static_cast<long long>(size), ms, tflops);
    std::printf("RESULT matmul_bf16_%lld_tflops %.2f\n", static_cast<long long>(size), tflops);
  }
  // The INT8 product of the W8A8 linears (T::intMatmul, mma.sync s8) at a DiT linear's shape:
  // 4096 tokens by 3072 (scripts/device-check.sh runs torch._int_mm beside it).
  for (int64_t size : quick ? std::vector<int64_t>{256} : std::vector<int64_t>{3072, 8192}) {
    const auto a = T::uniform(T::Key(5), {4096, size}, -127.0, 127.0).cast(DType::I8).on(*g);
    const auto b = T::uniform(T::Key(6), {size, size}, -127.0, 127.0).cast(DType::I8).on(*g);
    T::Tensor c;
    const double ms = medianMs(*g, 10, [&] { c = T::intMatmul(a, b); });
    const double tops = 2.0 * 4096 * size * size / ms / 1e9;
    std::printf("intMatmul i8 4096 x %-14lld %9.3f ms  %8.1f TOP/s\n", static_cast<long long>(size), ms, tops);
    std::printf("RESULT int_matmul_4096x%lld_tops %.2f\n", static_cast<long long>(size), tops);
  }
  std::printf("RESULT copy_gbs %.1f\nRESULT chain_ratio %.3f\nRESULT sum_ratio %.3f\nRESULT rowsum_ratio %.3f\n", copyGBs,
              chainGBs / copyGBs, sumGBs / copyGBs, rowGBs / copyGBs);
  return 0;
}
