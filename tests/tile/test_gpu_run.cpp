// Tile::run on GPU tensors: the CPU tests' programs (tests/tile/programs.h) on the GPU against the
// CPU executor. Bit-equal where the GPU follows the CPU's order of additions and its math
// (elementwise + - * / relu..., sums in the 16-lane order, F32 products as fma chains); within a
// stated tolerance where it uses its own exp/sigmoid or the tensor cores. Each test reports
// itself skipped, with the reason, where no GPU is found.
#include <gizhw/gpu.h>
#include <gizml/tile.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>

#include "common/gpu_checks.h"
#include "programs.h"

using namespace gizml;
using gizml::test::expectBits;

namespace {

class TileGpu : public gizml::test::GpuTest {};

// Runs body over the host tensors on the CPU and over their GPU copies on the GPU (the bodies
// read the tensors they were made with: `make` builds one from given tensors).
template <class Make>
std::pair<std::vector<T::Tensor>, std::vector<T::Tensor>> both(const Tile::Grid& grid, const Make& make,
                                                               const std::vector<T::Tensor>& in, const gizhw::gpu::Gpu& gpu) {
  std::vector<T::Tensor> onGpu;
  for (const auto& t : in) onGpu.push_back(t.on(gpu));
  auto cpu = Tile::run(grid, make(in));
  auto gpuOut = Tile::run(grid, make(onGpu));
  return {cpu, gpuOut};
}


// |gpu - cpu| <= abs + rel |cpu| for every element.
void expectClose(const T::Tensor& gpuResult, const T::Tensor& cpu, double abs, double rel, const std::string& what) {
  ASSERT_TRUE(gpuResult.onGpu()) << what;
  const auto a = gpuResult.host().toDoubles(), b = cpu.toDoubles();
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::isnan(a[i]), std::isnan(b[i])) << what << ": element " << i << " is " << a[i] << " on the GPU, " << b[i];
    if (std::isnan(a[i]) || a[i] == b[i]) continue;  // NaNs, and infinities of one sign
    ASSERT_LE(std::abs(a[i] - b[i]), abs + rel * std::abs(b[i]))
        << what << ": element " << i << " is " << a[i] << " on the GPU, " << b[i] << " on the CPU";
  }
}

}  // namespace

TEST_F(TileGpu, GuideExampleBitsEqual) {
  const auto x = T::tensor({4, 4}, {-2, -1, 0, 1, 2, 3, 4, 5, -3, -4, 6, 7, 8, -9, 1, 0.5});
  const auto w = T::tensor({1, 4}, {1, 2, 3, 4});
  const auto [cpu, g] = both({1}, [](const auto& t) { return tileprog::guide(t[0], t[1]); }, {x, w}, gpu());
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].host().text(), "[[0, 0, 1, 5], [3, 7, 13, 21], [0, 0, 19, 29], [9, 0, 4, 3]]");
  expectBits(g[0], cpu[0], "guide");
}

TEST_F(TileGpu, ProductF32BitsEqual) {
  // F32 operands take the fma loop in the CPU's order (an fma chain over each k block from +0,
  // added to the accumulator): the same bits, edges masked on every axis.
  const auto a = T::uniform(T::Key(1), {1000, 333}, -1, 1), b = T::uniform(T::Key(2), {333, 777}, -1, 1);
  const auto [cpu, g] = both(tileprog::productGrid(a, b, 128, 128),
                             [](const auto& t) { return tileprog::product(t[0], t[1], 128, 128, 32); }, {a, b}, gpu());
  expectBits(g[0], cpu[0], "f32 product 1000 x 333 x 777");
}

TEST_F(TileGpu, ProductBf16OnTensorCoresWithinTolerance) {
  if (gpu().properties().major < 8) GTEST_SKIP() << "tensor cores need compute capability 8.0 (TensorCoresBelow80AreAnError)";
  // BF16 operands: mma.sync with f32 accumulators, in the hardware's order of additions. Products
  // of BF16 values are exact in f32, so the difference is the order (and the tensor cores'
  // accumulation): at most 1e-3 + 1e-4 |x| for these sums of 333 terms of magnitude <= 1.
  const auto a = T::uniform(T::Key(3), {1000, 333}, -1, 1, DType::BF16),
             b = T::uniform(T::Key(4), {333, 777}, -1, 1, DType::BF16);
  for (int stages : {1, 3}) {
    const auto [cpu, g] = both(tileprog::productGrid(a, b, 128, 128),
                               [&](const auto& t) { return tileprog::product(t[0], t[1], 128, 128, 32, stages); }, {a, b},
                               gpu());
    expectClose(g[0], cpu[0], 1e-3, 1e-4, "bf16 product, stages " + std::to_string(stages));
  }
}

TEST_F(TileGpu, ProductF16AlignedPipelineWithinTolerance) {
  if (gpu().properties().major < 8) GTEST_SKIP() << "tensor cores need compute capability 8.0 (TensorCoresBelow80AreAnError)";
  // Shapes whose rows are 16-byte aligned: the pipeline's 16-byte cp.async path; F16 operands.
  const auto a = T::uniform(T::Key(5), {512, 256}, -1, 1, DType::F16),
             b = T::uniform(T::Key(6), {256, 384}, -1, 1, DType::F16);
  for (int stages : {1, 2, 4}) {
    const auto [cpu, g] = both(tileprog::productGrid(a, b, 64, 64),
                               [&](const auto& t) { return tileprog::product(t[0], t[1], 64, 64, 32, stages); }, {a, b},
                               gpu());
    expectClose(g[0], cpu[0], 1e-3, 1e-4, "f16 product, stages " + std::to_string(stages));
  }
}

TEST_F(TileGpu, TensorCoresBelow80AreAnError) {
  // The generated F16/BF16 product has no fma fallback: below 8.0 (GIZML_GPU_EMULATOR_ARCH=75,
  // or an older GPU) Tile::run says so instead of failing in the compiler.
  if (gpu().properties().major >= 8) GTEST_SKIP() << "this GPU has tensor cores";
  const auto a = T::uniform(T::Key(3), {64, 32}, -1, 1, DType::BF16), b = T::uniform(T::Key(4), {32, 64}, -1, 1, DType::BF16);
  try {
    (void)both(tileprog::productGrid(a, b, 64, 64), [](const auto& t) { return tileprog::product(t[0], t[1], 64, 64, 32); },
               {a, b}, gpu());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor cores"), std::string::npos) << e.what();
  }
}

TEST_F(TileGpu, ProductOfCastTilesWithinTolerance) {
  if (gpu().properties().major < 8) GTEST_SKIP() << "tensor cores need compute capability 8.0 (TensorCoresBelow80AreAnError)";
  // F32 tensors cast to BF16 tiles in the program: the tensor cores from registers.
  const auto c = T::uniform(T::Key(7), {200, 136}, -1, 1), d = T::uniform(T::Key(8), {136, 96}, -1, 1);
  const auto [cpu, g] = both(tileprog::productGrid(c, d, 64, 32),
                             [](const auto& t) { return tileprog::product(t[0], t[1], 64, 32, 32, 2, DType::BF16); }, {c, d},
                             gpu());
  expectClose(g[0], cpu[0], 1e-3, 1e-4, "product of bf16 casts");
}

TEST_F(TileGpu, SoftmaxWithMasks) {
  // exp and sigmoid are the GPU's own (not bit-equal, docs/tensor.md); the maxima and sums
  // follow the CPU's order; the BF16 result may differ by one BF16 step (2^-8 relative), the
  // Bool output (t >= 0.5, no math) not at all.
  const auto h = T::normal(T::Key(9), {37, 29}).cast(DType::BF16);
  const auto [cpu, g] = both(tileprog::softmaxGrid(h), [](const auto& t) { return tileprog::softmax(t[0]); }, {h}, gpu());
  ASSERT_EQ(g.size(), 2u);
  expectClose(g[0], cpu[0], 1e-6, 1.0 / 128, "softmax rows");
  expectBits(g[1], cpu[1], "t >= 0.5");
}

TEST_F(TileGpu, FoldWithDynamicCountBitsEqual) {
  const auto x = T::arange(0, 24).reshape({2, 12}).cast(DType::F16);
  const auto [cpu, g] = both({3}, [](const auto& t) { return tileprog::foldSums(t[0]); }, {x}, gpu());
  EXPECT_EQ(g[0].host().text(), "[[6, 28, 66], [54, 124, 210]]");
  expectBits(g[0], cpu[0], "fold");
}

TEST_F(TileGpu, WritesIntoAGpuViewOnly) {
  // A GPU tensor written through a view: only the view's elements change; a host tensor given
  // to p.write comes back as a GPU copy holding its old values outside the blocks.
  const auto big = T::full({4, 4}, -1.0).on(gpu());
  const auto view = big.slice(0, 1, 4).slice(1, 1, 3);
  const auto x = T::arange(1, 16).reshape({5, 3}).on(gpu());
  const auto out = Tile::run({1}, [&](Tile::Program& p) {
    p.write(view, {4, 4}).put(p.full({4, 4}, 5.0), {0, 0});
    p.write(T::full({6, 4}, 9.0), {4, 4}).put(p.read(x, {4, 4}, 7.0).at({0, 0}), {0, 0});
  });
  EXPECT_EQ(big.host().text(), "[[-1, -1, -1, -1], [-1, 5, 5, -1], [-1, 5, 5, -1], [-1, 5, 5, -1]]");
  ASSERT_TRUE(out[1].onGpu());
  EXPECT_EQ(out[1].host().text(),
            "[[1, 2, 3, 7], [4, 5, 6, 7], [7, 8, 9, 7], [10, 11, 12, 7], [9, 9, 9, 9], [9, 9, 9, 9]]");
}

TEST_F(TileGpu, HostReadNextToGpuTensorIsAnError) {
  const auto a = T::ones({4, 4}).on(gpu()), b = T::ones({4, 4});
  try {
    Tile::run({1}, [&](Tile::Program& p) {
      const auto x = p.read(a, {4, 4}).at({0, 0}), y = p.read(b, {4, 4}).at({0, 0});
      p.write(T::zeros({4, 4}), {4, 4}).put(x + y, {0, 0});
    });
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("t1 (read f32[4, 4]) is on cpu but t0 (read f32[4, 4]) is on cuda:0"), std::string::npos) << m;
  }
}

TEST_F(TileGpu, EveryOperationAgainstTheCpu) {
  // Bit-equal where the GPU's elementwise text follows the CPU (docs/tensor.md); the GPU's own
  // math library for exp, log, sin, cos, tanh, sigmoid, silu, gelu, geluTanh and pow: within
  // 1e-6 + 1e-5 |x|.
  const auto x = T::uniform(T::Key(11), {37, 29}, -4, 4), y = T::uniform(T::Key(12), {37, 29}, -4, 4);
  const auto [cpu, g] = both(tileprog::everyOperationGrid(x), [](const auto& t) { return tileprog::everyOperation(t[0], t[1]); },
                             {x, y}, gpu());
  std::vector<std::string> names(tileprog::unaryNames().begin(), tileprog::unaryNames().end());
  names.insert(names.end(), tileprog::binaryNames().begin(), tileprog::binaryNames().end());
  ASSERT_EQ(g.size(), names.size());
  const std::set<std::string> ownMath = {"exp", "log", "sin", "cos", "tanh", "sigmoid", "silu", "gelu", "geluTanh", "pow"};
  for (size_t i = 0; i < g.size(); ++i) {
    if (ownMath.count(names[i])) expectClose(g[i], cpu[i], 1e-6, 1e-5, names[i]);
    else expectBits(g[i], cpu[i], names[i]);
  }
}

TEST_F(TileGpu, BroadcastingBitsEqual) {
  const auto x = T::uniform(T::Key(7), {4, 4}), row = T::uniform(T::Key(8), {1, 4}), col = T::uniform(T::Key(9), {4, 1});
  const auto [cpu, g] = both({1}, [](const auto& t) { return tileprog::broadcasting(t[0], t[1], t[2]); }, {x, row, col}, gpu());
  for (size_t i = 0; i < g.size(); ++i) expectBits(g[i], cpu[i], "broadcast output " + std::to_string(i));
}

TEST_F(TileGpu, ReductionsAlongEachAxis) {
  // Sums in the CPU's order, max and min exact: bit-equal; the softmax within 2 ulps of f32 (exp).
  const auto x = T::normal(T::Key(10), {16, 40});
  const auto [cpu, g] = both({1}, [](const auto& t) { return tileprog::reductions(t[0]); }, {x}, gpu());
  expectClose(g[0], cpu[0], 1e-7, 1e-6, "softmax");
  expectBits(g[1], cpu[1], "sum 0");
  expectBits(g[2], cpu[2], "sum 1");
  expectBits(g[3], cpu[3], "max 0");
  expectBits(g[4], cpu[4], "min 1");
}

TEST_F(TileGpu, LongReductionsKeepTheCpuOrderAcrossChunks) {
  // Rows of 9000: three chunks of the CPU's order (4096, 4096, 808), each in 16 lanes that the
  // block's threads compute side by side; sums bit-equal, max and min too.
  const auto x = T::normal(T::Key(17), {3, 9000});
  const auto body = [](const T::Tensor& in) {
    return [in](Tile::Program& p) {
      const auto i = p.id(0), zero = p.index(0);
      const auto t = p.read(in, {1, 9000}).at({i, zero});
      p.write(T::zeros({3, 1}), {1, 1}).put(t.sum(1), {i, zero});
      p.write(T::zeros({3, 1}), {1, 1}).put(t.max(1), {i, zero});
      p.write(T::zeros({3, 1}), {1, 1}).put(t.min(1), {i, zero});
    };
  };
  const auto [cpu, g] = both({3}, [&](const auto& t) { return body(t[0]); }, {x}, gpu());
  expectBits(g[0], cpu[0], "sum of 9000");
  expectBits(g[1], cpu[1], "max of 9000");
  expectBits(g[2], cpu[2], "min of 9000");
}

TEST_F(TileGpu, MasksAndTransposedViews) {
  const auto x = T::arange(1, 16).reshape({5, 3});
  const auto [cpu, g] = both({2, 1}, [](const auto& t) { return tileprog::masks(t[0]); }, {x}, gpu());
  expectBits(g[0], cpu[0], "fill outside");
  // A strided operand read through its strides, blocks of 16 x 8 with k blocks of 5 (the fma loop).
  const auto at = T::uniform(T::Key(3), {19, 45}, -1, 1), b = T::uniform(T::Key(4), {19, 23}, -1, 1);
  const auto a = at.transpose(0, 1);
  const auto cpuP = Tile::run(tileprog::productGrid(a, b, 16, 8), tileprog::product(a, b, 16, 8, 5));
  const auto gpuP = Tile::run(tileprog::productGrid(a, b, 16, 8),
                              tileprog::product(at.on(gpu()).transpose(0, 1), b.on(gpu()), 16, 8, 5));
  expectBits(gpuP[0], cpuP[0], "product of a transposed view");
  // An empty grid writes nothing (the host tensor comes back as its GPU copy).
  const auto e = Tile::run({0}, [&](Tile::Program& p) {
    p.read(x.on(gpu()), {5, 3});
    p.write(T::ones({3}), {4}).put(p.zeros({4}), {p.id(0)});
  });
  ASSERT_TRUE(e[0].onGpu());
  EXPECT_EQ(e[0].host().text(), "[1, 1, 1]");
}

TEST_F(TileGpu, TuneOnGpuTensorsKeepsAConfigurationForThem) {
  if (gpu().properties().major < 8) GTEST_SKIP() << "tensor cores need compute capability 8.0 (TensorCoresBelow80AreAnError)";
  // Block sizes and stages of the BF16 product on GPU tensors: every configuration gives the CPU's
  // product (within the tensor-core tolerance), one is kept for the GPU key and not for the host's.
  gizhw::gpu::clearTunings();
  const auto a = T::uniform(T::Key(15), {256, 128}, -1, 1, DType::BF16),
             b = T::uniform(T::Key(16), {128, 192}, -1, 1, DType::BF16);
  const auto ga = a.on(gpu()), gb = b.on(gpu());
  const auto cpu = Tile::run(tileprog::productGrid(a, b, 64, 64), tileprog::product(a, b, 64, 64, 32))[0];
  const std::vector<Tile::Config> configs = {{{"bm", 128}, {"bn", 128}, {"bk", 32}, {"stages", 3}},
                                             {{"bm", 64}, {"bn", 64}, {"bk", 32}, {"stages", 2}},
                                             {{"bm", 64}, {"bn", 32}, {"bk", 64}, {"stages", 1}}};
  std::set<std::string> ran;
  const auto runWith = [&](const Tile::Config& c) {
    ran.insert(c.text());
    const auto out = Tile::run(tileprog::productGrid(ga, gb, c["bm"], c["bn"]),
                               tileprog::product(ga, gb, c["bm"], c["bn"], c["bk"], static_cast<int>(c["stages"])));
    expectClose(out[0], cpu, 2e-2, 1e-2, c.text());
    return out;
  };
  const auto out = Tile::tune("bf16_product", configs, {ga, gb}, runWith);
  EXPECT_EQ(ran.size(), configs.size());
  expectClose(out[0], cpu, 2e-2, 1e-2, "tuned");
  const auto kept = Tile::tuned("bf16_product", {ga, gb});
  ASSERT_TRUE(kept);
  EXPECT_NE(std::find(configs.begin(), configs.end(), *kept), configs.end());
  EXPECT_FALSE(Tile::tuned("bf16_product", {a, b}));  // the host tensors are another key
  gizhw::gpu::clearTunings();
}
