// lazyConv and lazyConv3 as deferred products: the elementwise tail chained on them (bias,
// activation, residual add, cast) runs on each tile of the product, with the output as the only
// allocation, and gives the bits of the unfused result: the product computed first as
// w.matmul(patchRows(x)) (checked against numpy in rows_conv_test.cpp), then each operation on
// its own. Bit equality holds because a tile's product is sgemm's, whose order of additions does
// not depend on the tile, and the chain's operations are the per-operation kernels' (test_lazy).
// On a GPU (GIZML_GPU_EMULATOR=1 on the host): on NVIDIA's matrix cores (BF16, 3 x 3, pad 1, width
// a multiple of 8) the tail is generated into the implicit product's store, giving the bits of the
// product stored first and the tail run after it (the same accumulators and the same generated
// expression); elsewhere the product is computed first, then the tail, the host's bits in F32.
#include <gizml/netops_rows.h>
#include <gtest/gtest.h>

#include <cmath>

#include "common/gpu_checks.h"
#include "netops/rows_fixture.h"

using namespace gizml;
namespace N = gizml::netops;

namespace {

T::Tensor randomTensor(const T::Shape& shape, uint64_t seed) { return T::normal(T::Key(seed), shape, 0.0, 1.0); }

// The convolution computed first: w times the whole patch matrix, [o, oh ow].
T::Tensor unfusedConv(const T::Tensor& w, const T::Tensor& x, int64_t k, int64_t pad) {
  return w.matmul(N::patchRows(x, k, k, pad, 0, x.size(1) + 2 * pad - k + 1));
}

struct Shape3 {
  int64_t o, c, h, w, k, pad;
};

// Small shapes, and one whose product is cut into two bands of columns (c k k = 576 inputs:
// 455 columns a tile, 600 pixels) with two sgemm k blocks.
const Shape3 kShapes[] = {{6, 4, 9, 11, 3, 1}, {5, 3, 7, 8, 3, 0}, {3, 2, 6, 5, 1, 0}, {8, 64, 30, 20, 3, 1}};

}  // namespace

TEST(NetopsRowsConvFused, TailChainsGiveTheUnfusedBits) {
  for (const Shape3& s : kShapes) {
    SCOPED_TRACE(std::to_string(s.o) + " x " + std::to_string(s.c) + " x " + std::to_string(s.h) + " x " +
                 std::to_string(s.w));
    const auto x = randomTensor({s.c, s.h, s.w}, 11), w = randomTensor({s.o, s.c * s.k * s.k}, 12);
    const auto bias = randomTensor({s.o, 1}, 13);
    const auto conv = N::lazyConv(w, x, s.k, s.k, s.pad, DType::F32);
    const auto product = unfusedConv(w, x, s.k, s.pad);
    const auto residual = randomTensor(product.shape(), 14);
    EXPECT_EQ(conv.eval().toFloats(), product.toFloats());
    EXPECT_EQ((conv + T::lazy(bias)).eval().toFloats(), product.add(bias).toFloats());
    EXPECT_EQ((conv + T::lazy(bias)).silu().eval().toFloats(), product.add(bias).silu().toFloats());
    EXPECT_EQ((conv * 0.5).gelu().eval().toFloats(), product.mul(T::scalar(0.5)).gelu().toFloats());
    const auto full = ((conv + T::lazy(bias)).silu() + T::lazy(residual)).cast(DType::BF16).eval();
    EXPECT_EQ(full.dtype(), DType::BF16);
    EXPECT_EQ(full.toFloats(), product.add(bias).silu().add(residual).cast(DType::BF16).toFloats());
    // The product read twice (x sigmoid(x)) is still one product, computed once a tile.
    EXPECT_EQ((conv * conv.sigmoid()).eval().toFloats(), product.mul(product.sigmoid()).toFloats());
    // Broadcast to [2, o, oh ow]: the product computed first (band by band too).
    const auto wide = randomTensor({2, s.o, product.size(1)}, 15);
    EXPECT_EQ((conv + T::lazy(wide)).eval().toFloats(), product.add(wide).toFloats());
  }
}

TEST(NetopsRowsConvFused, TailOnTheNumpyConvolution) {
  // silu(conv + bias) against the numpy convolution of the fixture, in float64 here: within
  // 1e-5 of sum |w x| (rows_conv_test's bound for the product; silu's slope is below 1.1).
  const auto& c = rows_fixture::find("lazyconv_3x3_p1");
  const auto x = rows_fixture::tensor(c, "x"), w = rows_fixture::tensor(c, "w");
  const std::vector<double> bias = {0.5, -1, 0.25, 2};
  const auto got = (N::lazyConv(w, x, 3, 3, 1, DType::F32) + T::lazy(T::tensor({4, 1}, bias))).silu().eval().toDoubles();
  const auto want = rows_fixture::values(c.array("out"));
  const auto bound = N::lazyConv(w.abs(), x.abs(), 3, 3, 1, DType::F32).eval().toDoubles();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double v = want[i] + bias[i / 30];
    EXPECT_NEAR(got[i], v / (1 + std::exp(-v)), 1.1e-5 * bound[i] + 1e-6 * std::fabs(v)) << i;
  }
}

TEST(NetopsRowsConvFused, OnlyTheOutputIsAllocated) {
  // Counted over eval() (building a Lazy's nodes allocates their empty leaf tensors, as in test_lazy).
  const auto x = randomTensor({8, 12, 16}, 21), w = randomTensor({16, 8 * 9}, 22), bias = randomTensor({16, 1}, 23);
  const auto residual = randomTensor({16, 12 * 16}, 24);
  const auto chain = ((N::lazyConv(w, x, 3, 3, 1, DType::F32) + T::lazy(bias)).silu() + T::lazy(residual)).cast(DType::BF16);
  uint64_t before = T::Storage::allocations();
  const auto out = chain.eval();
  EXPECT_EQ(T::Storage::allocations() - before, 1u) << "an intermediate tensor beside the [16, 192] BF16 output";

  const auto frames = randomTensor({5, 2, 6, 7}, 25), w3 = randomTensor({4, 27 * 2}, 26);
  const auto bias3 = randomTensor({4, 1}, 27);
  const auto chain3 = (N::lazyConv3(w3, frames) + T::lazy(bias3)).relu();
  before = T::Storage::allocations();
  const auto out3 = chain3.eval();
  EXPECT_EQ(T::Storage::allocations() - before, 1u) << "an intermediate tensor beside the [3, 4, 42] output";
  EXPECT_EQ(out3.shape(), (T::Shape{3, 4, 42}));

  // What is computed first shows here: broadcast to [2, 16, 192], the product is a tensor too.
  const auto wide = randomTensor({2, 16, 12 * 16}, 28);
  const auto broadcast = N::lazyConv(w, x, 3, 3, 1, DType::F32) + T::lazy(wide);
  before = T::Storage::allocations();
  broadcast.eval();
  EXPECT_GE(T::Storage::allocations() - before, 2u);
}

TEST(NetopsRowsConvFused, LazyConv3FusesEachFrame) {
  const int64_t n = 3, c = 2, o = 5, h = 6, wd = 7;
  const auto x = randomTensor({n + 2, c, h, wd}, 31), w = randomTensor({o, 27 * c}, 32);
  const auto bias = randomTensor({o, 1}, 33), residual = randomTensor({n, o, h * wd}, 34);
  std::vector<T::Tensor> frames;
  for (int64_t t = 1; t <= n; ++t) frames.push_back(unfusedConv(w, x.slice(0, t - 1, t + 2).reshape({3 * c, h, wd}), 3, 1));
  const auto product = T::stack(frames, 0);
  const auto conv = N::lazyConv3(w, x);
  EXPECT_EQ(conv.eval().toFloats(), product.toFloats());
  const auto got = ((conv + T::lazy(bias)).silu() + T::lazy(residual)).cast(DType::BF16).eval();
  EXPECT_EQ(got.toFloats(), product.add(bias).silu().add(residual).cast(DType::BF16).toFloats());
}

TEST(NetopsRowsConvFused, WhatCannotRunInTilesIsComputedFirst) {
  const auto x = randomTensor({3, 5, 6}, 41), w = randomTensor({4, 27}, 42), w2 = randomTensor({4, 27}, 43);
  const auto conv = N::lazyConv(w, x, 3, 3, 1, DType::F32), conv2 = N::lazyConv(w2, x, 3, 3, 1, DType::F32);
  const auto product = unfusedConv(w, x, 3, 1), product2 = unfusedConv(w2, x, 3, 1);
  // Broadcast to a larger shape, and two products in one expression.
  const auto wide = randomTensor({2, 4, 30}, 44);
  EXPECT_EQ((conv + T::lazy(wide)).eval().toFloats(), product.add(wide).toFloats());
  EXPECT_EQ((conv + conv2).relu().eval().toFloats(), product.add(product2).relu().toFloats());
  // One output pixel (its axis of one element is not the tiles' columns): computed first too.
  const auto one = T::ones({2, 3, 3}), w1 = randomTensor({3, 18}, 45);
  EXPECT_EQ((N::lazyConv(w1, one, 3, 3, 0, DType::F32) + 1.0).eval().toFloats(),
            unfusedConv(w1, one, 3, 0).add(T::scalar(1.0)).toFloats());
  // evalInto an output given by the caller.
  const auto into = T::empty({4, 30});
  (conv + 1.0).evalInto(into);
  EXPECT_EQ(into.toFloats(), product.add(T::scalar(1.0)).toFloats());
}

class LazyConvFusedGpu : public test::GpuTest {};

TEST_F(LazyConvFusedGpu, TailOnTheGpuGivesTheHostsBits) {
  const auto x = randomTensor({4, 9, 11}, 51), w = randomTensor({6, 36}, 52);
  const auto bias = randomTensor({6, 1}, 53), residual = randomTensor({6, 99}, 54);
  auto tail = [&](const T::Lazy& conv, const T::Tensor& b, const T::Tensor& r) {
    return ((conv + T::lazy(b)).relu() + T::lazy(r)).cast(DType::BF16).eval();
  };
  const auto host = tail(N::lazyConv(w, x, 3, 3, 1, DType::F32), bias, residual);
  const auto got = tail(N::lazyConv(on(w), on(x), 3, 3, 1, DType::F32), on(bias), on(residual));
  test::expectBits(got, host, "lazyConv f32 + bias, relu, + residual, bf16");
  // lazyConv3 off the matrix cores (width 7): a lazyConv a frame in F32, the host's bits.
  const auto frames = randomTensor({4, 2, 5, 7}, 55).cast(DType::BF16), w3 = randomTensor({3, 54}, 56);
  const auto bias3 = randomTensor({3, 1}, 57);
  test::expectBits((N::lazyConv3(on(w3), on(frames)) + T::lazy(on(bias3))).relu().eval(),
                   (N::lazyConv3(w3, frames) + T::lazy(bias3)).relu().eval(), "lazyConv3 + bias, relu");
}

TEST_F(LazyConvFusedGpu, TailInTheImplicitProductsStore) {
  const auto& p = gpu_->properties();
  if (!(p.vendor == gizhw::gpu::Vendor::Nvidia && p.major >= 8)) GTEST_SKIP() << "no NVIDIA matrix cores";
  // o = 70: two 64-row tiles; 9 x 16 = 144 pixels: three 64-pixel tiles, the last partial.
  const int64_t o = 70, c = 3, h = 9, wd = 16;
  const auto x = on(randomTensor({c, h, wd}, 61)), w = on(randomTensor({o, c * 9}, 62));
  const auto bias = on(randomTensor({o, 1}, 63)), residual = on(randomTensor({o, h * wd}, 64));
  auto tail = [&](const T::Lazy& conv) { return ((conv + T::lazy(bias)).silu() + T::lazy(residual)).cast(DType::BF16); };
  const auto conv = N::lazyConv(w, x, 3, 3, 1, DType::BF16);
  const auto stored = conv.eval();  // the product alone, then the tail over it
  const auto chain = tail(conv);
  const uint64_t before = T::Storage::allocations();
  const auto fused = chain.eval();
  EXPECT_EQ(T::Storage::allocations() - before, 1u) << "the product was stored beside the BF16 output";
  test::expectBits(fused, tail(T::lazy(stored)).eval().host(), "lazyConv bf16 + bias, silu, + residual, bf16");

  // lazyConv3: one product of n images, the tail per frame in the same store.
  const int64_t n = 3, c3 = 2;
  const auto frames = on(randomTensor({n + 2, c3, 5, wd}, 65).cast(DType::BF16)), w3 = on(randomTensor({9, 27 * c3}, 66));
  const auto bias3 = on(randomTensor({9, 1}, 67)), residual3 = on(randomTensor({n, 9, 5 * wd}, 68));
  const auto conv3 = N::lazyConv3(w3, frames);
  const auto want = ((T::lazy(conv3.eval()) + T::lazy(bias3)).relu() + T::lazy(residual3)).eval().host();
  test::expectBits(((conv3 + T::lazy(bias3)).relu() + T::lazy(residual3)).eval(), want, "lazyConv3 + bias, relu, + residual");
}
