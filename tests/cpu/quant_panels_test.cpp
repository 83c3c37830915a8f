// QuantMatrix (cpu/quant_panels.h): weights repacked into panels of 8 rows give the products of
// the double-precision reference (group_quant's own dequantizer times the int8 activations) for
// every bit width and group, with row counts that leave a partial last panel and activation row
// counts that leave every tail of the 4-row register tile and of the 64-row chunks (CPUs without
// AVX2 keep the row-major kernels, which must give the same products).
#include "cpu/quant_panels.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "common/expect_error.h"
#include "cpu/quant_reference.h"

using namespace gizml;
using namespace gizml::cpu;
using namespace gizml::cpu::testing;

namespace {

void expectProductsMatchReference(const Quantized& q, const QuantActs& x) {
  const QuantMatrix m(q.weights);
  EXPECT_EQ(m.packed(), QuantMatrix::panelsSupported(q.weights.bits, q.weights.group));
  const int64_t out = q.weights.rows;
  std::vector<float> y(static_cast<size_t>(x.rows * out), -7.0f);
  m.matmul(x, y.data());
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      const ReferenceDot want = referenceDot(q, x, r, o);
      // f32 sums of per-group terms, and the dequantizer's own f32 rounding.
      ASSERT_NEAR(y[static_cast<size_t>(r * out + o)], want.value, 2e-6 * want.magnitude + 1e-6)
          << "activation row " << r << ", output row " << o;
    }
}

QuantActs activations(int64_t rows, int64_t cols, int64_t group, unsigned seed) {
  std::vector<float> xf = gaussian(static_cast<size_t>(rows * cols), seed);
  for (size_t i = 0; i < xf.size(); i += 7) xf[i] *= 20.0f;  // outliers, as in real activations
  QuantActs x;
  quantizeActs(xf.data(), rows, cols, group, x);
  return x;
}

}  // namespace

TEST(QuantPanels, EveryBitWidthAndGroupMatchesDoubleReference) {
  for (int64_t group : {8, 16, 24, 32, 64, 128})
    for (int bits = 2; bits <= 8; ++bits) {
      SCOPED_TRACE(std::to_string(bits) + " bits, group " + std::to_string(group));
      // 21 output rows: two full panels and one of 5 rows; 7 activation rows: a 4-row tile and 3.
      const Quantized q = quantizeWeights(bits, group, 21, group * 3, static_cast<unsigned>(bits * 17 + group));
      expectProductsMatchReference(q, activations(7, group * 3, group, static_cast<unsigned>(bits + group)));
    }
}

TEST(QuantPanels, DecodeAndLongPrefillsMatchReference) {
  // One activation row (decode) and 133 (two 64-row chunks, a tail of 5: a 4-row tile and one).
  const Quantized q = quantizeWeights(4, 32, 43, 256, 3);
  for (int64_t rows : {1, 2, 3, 133}) {
    SCOPED_TRACE(std::to_string(rows) + " activation rows");
    expectProductsMatchReference(q, activations(rows, 256, 32, static_cast<unsigned>(rows)));
  }
}

TEST(QuantPanels, ModelFormatsArePackedOnAvx2Cpus) {
  if (bestIsa() == Isa::Portable) GTEST_SKIP() << "no AVX2+FMA on this CPU (or GIZML_CPU_ISA=portable)";
  // The model formats (4 and 8-bit layers, 6 and 8-bit heads) must take the fast path here.
  for (int bits : {4, 6, 8}) EXPECT_TRUE(QuantMatrix::panelsSupported(bits, 32));
  EXPECT_FALSE(QuantMatrix::panelsSupported(4, 12));
}

TEST(QuantPanels, ActivationsOfAnotherWidthAreErrors) {
  const Quantized q = quantizeWeights(4, 32, 8, 64, 1);
  const QuantMatrix m(q.weights);
  std::vector<float> y(8);
  expectError([&] { m.matmul(activations(1, 32, 32, 2), y.data()); }, {"32 columns", "64"});
  expectError([&] { m.matmul(activations(1, 64, 16, 2), y.data()); }, {"groups of 16", "groups of 32"});
}

TEST(QuantPanels, MatricesSharingActivationsGiveTheirOwnProducts) {
  // Matrices of different heights and code widths in one pass.
  const Quantized a = quantizeWeights(4, 32, 19, 64, 11), b = quantizeWeights(6, 32, 8, 64, 12),
                  c = quantizeWeights(8, 32, 5, 64, 13);
  const QuantMatrix ma(a.weights), mb(b.weights), mc(c.weights);
  const QuantActs x = activations(3, 64, 32, 14);
  std::vector<float> ya(3 * 19), yb(3 * 8), yc(3 * 5);
  matmulAll(std::array<const QuantMatrix*, 3>{&ma, &mb, &mc}, x, std::array<float*, 3>{ya.data(), yb.data(), yc.data()});
  for (auto [m, y] : {std::pair{&ma, &ya}, std::pair{&mb, &yb}, std::pair{&mc, &yc}}) {
    std::vector<float> alone(y->size());
    m->matmul(x, alone.data());
    EXPECT_EQ(*y, alone);
  }
  expectError([&] { matmulAll(std::array<const QuantMatrix*, 1>{&ma}, x, std::span<float* const>{}); }, {"one output per matrix"});
}

TEST(QuantPanels, APassSplitByBytesGivesEachMatrixThePortableKernelsBits) {
  // Big enough for many pieces of a pass (cpu/quant_panels.cpp splits by weight bytes, 64 KiB a
  // piece at one activation row): a 4-bit matrix beside a 6-bit one three times its height (the
  // layers and the head), and an 8-bit one, cut where their bytes say. Every output must be the
  // one the portable row-major kernel gives alone, bit for bit, wherever the cuts fall.
  const Quantized a = quantizeWeights(4, 32, 1000, 512, 21), b = quantizeWeights(6, 32, 3001, 512, 22),
                  c = quantizeWeights(8, 32, 77, 512, 23);
  const QuantMatrix ma(a.weights), mb(b.weights), mc(c.weights);
  for (int64_t rows : {1, 5}) {
    SCOPED_TRACE(std::to_string(rows) + " activation rows");
    const QuantActs x = activations(rows, 512, 32, 24);
    std::vector<float> ya(static_cast<size_t>(rows * 1000)), yb(static_cast<size_t>(rows * 3001)),
        yc(static_cast<size_t>(rows * 77));
    matmulAll(std::array<const QuantMatrix*, 3>{&ma, &mb, &mc}, x, std::array<float*, 3>{ya.data(), yb.data(), yc.data()});
    for (auto [q, y] : {std::pair{&a, &ya}, std::pair{&b, &yb}, std::pair{&c, &yc}}) {
      std::vector<float> portable(y->size());
      QuantMatrix(q->weights, Isa::Portable).matmul(x, portable.data());
      EXPECT_EQ(*y, portable);
    }
  }
}
