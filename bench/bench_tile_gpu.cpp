// Tile programs on the GPU. The guide's product: BF16 [n, n] x [n, n] in each of the block sizes
// and stages Tile::tune chooses from, then tuned, in TFLOP/s (tensor cores: wgmma and TMA on
// 9.0); scripts/device-check.sh runs torch.matmul beside it for the ratio. Row softmax and layer norm of BF16 [rows, width] (a block
// of whole rows each), in GB/s beside a device-to-device copy of the same bytes in the same run.
// Each program's result is checked against the tensor library first. Times are medians of
// CUDA-event timings after a warm-up (which compiles the kernel). Without a GPU it says so and
// exits 0. `--quick`: small sizes (for the GPU emulator).
#include <gizhw/gpu.h>
#include <gizml/netops.h>
#include <gizml/tile.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gpu_timing.h"

using namespace gizml;
namespace gpu = gizhw::gpu;

namespace {

// Softmax of each row of x, `rows` whole rows a block, in f32, written as BF16.
Tile::Body rowSoftmax(const T::Tensor& x, const T::Tensor& y, int64_t rows) {
  return [=](Tile::Program& p) {
    const auto i = p.id(0);
    const auto t = p.read(x, {rows, x.size(1)}, -INFINITY).at({i, 0}).cast(DType::F32);
    const auto e = (t - t.max(1)).exp();
    p.write(y, {rows, x.size(1)}).put((e / e.sum(1)).cast(DType::BF16), {i, 0});
  };
}

// Layer norm of each row of x (weight w, bias b: [1, width] F32), `rows` whole rows a block.
Tile::Body rowLayerNorm(const T::Tensor& x, const T::Tensor& w, const T::Tensor& b, const T::Tensor& y, int64_t rows) {
  return [=](Tile::Program& p) {
    const auto i = p.id(0);
    const double n = static_cast<double>(x.size(1));
    const auto t = p.read(x, {rows, x.size(1)}).at({i, 0}).cast(DType::F32);
    const auto d = t - t.sum(1) / n;
    const auto r = ((d * d).sum(1) / n + 1e-5).rsqrt();
    const auto W = p.read(w, {1, x.size(1)}).at({0, 0}), B = p.read(b, {1, x.size(1)}).at({0, 0});
    p.write(y, {rows, x.size(1)}).put((d * r * W + B).cast(DType::BF16), {i, 0});
  };
}

// The largest |a - b| of two tensors' values, on the host.
double maxDifference(const T::Tensor& a, const T::Tensor& b) {
  const auto x = a.host().toDoubles(), y = b.host().toDoubles();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

// Softmax and layer norm as tile programs beside a device copy of the bytes they move.
void rowPrograms(gpu::Gpu& g, bool quick) {
  const int64_t rows = quick ? 64 : 32768, width = quick ? 1024 : 4096;
  const auto x = T::normal(T::Key(5), {rows, width}).cast(DType::BF16).on(g);
  const auto y = T::zeros({rows, width}, DType::BF16).on(g);
  const auto w = T::uniform(T::Key(6), {1, width}, 0.5, 1.5).on(g), b = T::normal(T::Key(7), {1, width}).on(g);
  const double bytes = 2.0 * rows * width * 2;  // BF16 read + write
  auto copy = g.allocate(static_cast<size_t>(rows * width * 2));
  const double copyMs = medianMs(g, 20, [&] {
    g.copyOnDevice(copy.address(), x.storage()->deviceAddress(), static_cast<size_t>(rows * width * 2), g.stream());
  });
  const double copyGBs = bytes / copyMs / 1e6;
  std::printf("anchor: device-to-device copy of [%lld, %lld] BF16 %9.3f ms  %8.1f GB/s\n", static_cast<long long>(rows),
              static_cast<long long>(width), copyMs, copyGBs);
  std::printf("RESULT tile_rows_copy_gbs %.1f\n", copyGBs);
  const auto softmaxWant = x.cast(DType::F32).softmax(-1);
  const auto normWant = netops::layerNorm(x.cast(DType::F32), w.reshape({width}), b.reshape({width}), 1e-5)[0];
  struct Program {
    const char* name;
    std::function<Tile::Body(int64_t)> body;
    const T::Tensor* want;
  };
  const std::vector<Program> programs = {
      {"softmax", [&](int64_t r) { return rowSoftmax(x, y, r); }, &softmaxWant},
      {"layernorm", [&](int64_t r) { return rowLayerNorm(x, w, b, y, r); }, &normWant}};
  for (const auto& prog : programs) {
    double best = 0;
    for (int64_t r : {1, 2, 4}) {
      const auto body = prog.body(r);
      const Tile::Grid grid = {Tile::cdiv(rows, r)};
      Tile::run(grid, body);
      // BF16 output: one BF16 step of the largest value (softmax <= 1; layer norm below 16).
      const double err = maxDifference(y, *prog.want), limit = prog.want == &softmaxWant ? 0x1p-8 : 0x1p-4;
      const double ms = medianMs(g, 10, [&] { Tile::run(grid, body); });
      const double gbs = bytes / ms / 1e6;
      std::printf("tile %-9s %lld row%s a block %9.3f ms  %8.1f GB/s  ratio to copy %.2f  max |error| %.2g%s\n",
                  prog.name, static_cast<long long>(r), r == 1 ? " " : "s", ms, gbs, gbs / copyGBs, err,
                  err <= limit ? "" : "  WRONG");
      if (err <= limit) best = std::max(best, gbs);
    }
    std::printf("RESULT tile_%s_ratio_to_copy %.3f\n", prog.name, best / copyGBs);
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto g = benchmarkGpu("bench_tile_gpu");
  if (!g) return 0;
  const bool quick = quickRun(argc, argv);
  for (int64_t n : quick ? std::vector<int64_t>{256} : std::vector<int64_t>{4096, 8192}) {
    const auto a = T::normal(T::Key(3), {n, n}).cast(DType::BF16).on(*g);
    const auto b = T::normal(T::Key(4), {n, n}).cast(DType::BF16).on(*g);
    const auto c = T::zeros({n, n}, DType::BF16).on(*g);  // written in place: no copy in the timing
    // The guide's product in the configurations Tile::tune chooses from (block rows, columns,
    // k block, stages); on 9.0 the larger ones run on wgmma with TMA-fed stages.
    const std::vector<Tile::Config> configs = {
        {{"bm", 128}, {"bn", 128}, {"bk", 32}, {"stages", 1}}, {{"bm", 128}, {"bn", 128}, {"bk", 32}, {"stages", 3}},
        {{"bm", 128}, {"bn", 128}, {"bk", 64}, {"stages", 3}}, {{"bm", 128}, {"bn", 256}, {"bk", 64}, {"stages", 3}},
        {{"bm", 128}, {"bn", 256}, {"bk", 32}, {"stages", 4}}};
    const auto grid = [&](const Tile::Config& cf) { return Tile::Grid{Tile::cdiv(n, cf["bm"]), Tile::cdiv(n, cf["bn"])}; };
    const auto body = [&](const Tile::Config& cf) {
      return [&, cf](Tile::Program& p) {
        const int64_t bm = cf["bm"], bn = cf["bn"], bk = cf["bk"];
        p.stages(static_cast<int>(cf["stages"]));
        const auto i = p.id(0), j = p.id(1);
        const auto A = p.read(a, {bm, bk}), B = p.read(b, {bk, bn});
        const auto acc = p.fold(p.index(0), A.blocks(1), p.zeros({bm, bn}),
                                [&](Tile::Index k, Tile::Tile acc) { return acc + A.at({i, k}).dot(B.at({k, j})); });
        p.write(c, {bm, bn}).put(acc, {i, j});
      };
    };
    const auto runWith = [&](const Tile::Config& cf) { return Tile::run(grid(cf), body(cf)); };
    // The host's part of a run (trace, generate the source, look it up): inside the timings below.
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < 20; ++r) (void)Tile::cuda(grid(configs[1]), body(configs[1]));
    const double hostMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 20;
    std::printf("tile product: trace + generate %.3f ms a run\n", hostMs);
    const T::Tensor want = a.matmul(b).cast(DType::F32);
    const double scale = want.abs().max().item();
    double best = 0;
    for (const Tile::Config& cf : configs) {
      // Five runs a timing, so that the host's part of one overlaps the GPU's work of the last.
      const double ms = medianMs(*g, 10, [&] {
        for (int r = 0; r < 5; ++r) runWith(cf);
      }) / 5;
      const double err = maxDifference(c, want) / scale;  // BF16 output: about 2^-9 of the largest
      const double tflops = 2.0 * n * n * n / ms / 1e9;
      std::printf("tile product bf16 %-6lld %-28s %9.3f ms  %8.1f TFLOP/s  rel. error %.1e%s\n", static_cast<long long>(n),
                  cf.text().c_str(), ms, tflops, err, err <= 2e-2 ? "" : "  WRONG");
      if (err <= 2e-2) best = std::max(best, tflops);
    }
    // Tile::tune's own choice among them (it times each again), then the kept one.
    gizhw::gpu::clearTunings();
    (void)Tile::tune("product", configs, {a, b}, runWith);
    const double tunedMs = medianMs(*g, 10, [&] {
      for (int r = 0; r < 5; ++r) Tile::tune("product", configs, {a, b}, runWith);
    }) / 5;
    std::printf("tile product bf16 %-6lld tuned: %s\n", static_cast<long long>(n), Tile::tuned("product", {a, b})->text().c_str());
    std::printf("RESULT tile_matmul_bf16_%lld_best_tflops %.2f\n", static_cast<long long>(n), best);
    std::printf("RESULT tile_matmul_bf16_%lld_tuned_tflops %.2f\n", static_cast<long long>(n), 2.0 * n * n * n / tunedMs / 1e9);
    // The same product by T::matmul (the fixed tensor-core kernel), for reference.
    T::Tensor d;
    const double ms = medianMs(*g, 10, [&] { d = a.matmul(b); });
    std::printf("RESULT tile_reference_matmul_bf16_%lld_tflops %.2f\n", static_cast<long long>(n), 2.0 * n * n * n / ms / 1e9);
  }
  rowPrograms(*g, quick);
  return 0;
}
