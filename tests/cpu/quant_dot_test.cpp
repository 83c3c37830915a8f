// The portable int8 x group-quantized kernel (cpu/quant_dot.h) against a double-precision
// reference: the weights dequantized by group_quant's own decoder times the activations as their
// int8 codes decode, on odd sizes (tails of the 16-row blocks), every bit width 2..8 and groups
// 8..128. Also the activation quantizer's rounding and its errors.
#include "cpu/quant_dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/expect_error.h"
#include "cpu/quant_reference.h"
#include "llm/quant/group_quant.h"

using namespace gizml;
using namespace gizml::cpu;
using namespace gizml::cpu::testing;

namespace {

// Runs the kernel over output rows [o0, o1) and compares with the double reference.
void expectMatchesReference(const Quantized& q, const QuantActs& x, int64_t o0, int64_t o1) {
  const int64_t out = q.weights.rows;
  std::vector<float> y(static_cast<size_t>(x.rows * out), -7.0f);
  quantDot(q.weights, o0, o1, x, y.data(), out);
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      const float got = y[static_cast<size_t>(r * out + o)];
      if (o < o0 || o >= o1) {
        ASSERT_EQ(got, -7.0f) << "row " << o << " outside the range was written";
        continue;
      }
      const ReferenceDot want = referenceDot(q, x, r, o);
      // f32 accumulation of per-group terms, and the dequantizer's own f32 rounding.
      ASSERT_NEAR(got, want.value, 2e-6 * want.magnitude + 1e-6) << "activation row " << r << ", output row " << o;
    }
}

}  // namespace

TEST(QuantDot, EveryBitWidthAndGroupMatchesDoubleReference) {
  for (int64_t group : {8, 16, 24, 32, 64, 128})
    for (int bits = 2; bits <= 8; ++bits) {
      // 37 output rows: two 16-row blocks and a tail of 5.
      const int64_t out = 37, cols = group * 3, rows = 5;
      const Quantized q = quantizeWeights(bits, group, out, cols, static_cast<unsigned>(bits * 131 + group));
      std::vector<float> xf = gaussian(static_cast<size_t>(rows * cols), static_cast<unsigned>(group + bits));
      for (size_t i = 0; i < xf.size(); i += 7) xf[i] *= 20.0f;  // outliers, as in real activations
      QuantActs x;
      quantizeActs(xf.data(), rows, cols, group, x);
      SCOPED_TRACE(std::to_string(bits) + " bits, group " + std::to_string(group));
      expectMatchesReference(q, x, 0, out);
      expectMatchesReference(q, x, 3, 22);
    }
}

TEST(QuantDot, MatmulEqualsTheKernelOnEveryRow) {
  const Quantized q = quantizeWeights(4, 32, 70, 96, 5);
  const std::vector<float> xf = gaussian(static_cast<size_t>(9 * 96), 6);
  QuantActs x;
  quantizeActs(xf.data(), 9, 96, 32, x);
  std::vector<float> all(static_cast<size_t>(9 * 70)), each(all.size());
  quantMatmul(q.weights, x, all.data());
  quantDot(q.weights, 0, 70, x, each.data(), 70);
  EXPECT_EQ(all, each);
}

TEST(QuantDot, ActivationCodesRoundToTheNearestStep) {
  std::vector<float> xf = gaussian(3 * 64, 9);
  for (int i = 64; i < 96; ++i) xf[static_cast<size_t>(i)] = 0.0f;  // an all-zero group
  QuantActs x;
  quantizeActs(xf.data(), 3, 64, 32, x);
  ASSERT_EQ(x.scale.size(), 6u);
  for (size_t b = 0; b < 6; ++b) {
    float amax = 0, sum = 0;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xf[b * 32 + i]));
    EXPECT_FLOAT_EQ(x.scale[b], amax / 127.0f);
    for (size_t i = 0; i < 32; ++i) {
      const int8_t c = x.codes[b * 32 + i];
      EXPECT_GE(c, -127);
      EXPECT_LE(std::fabs(x.scale[b] * c - xf[b * 32 + i]), x.scale[b] * 0.5f * 1.0001f);
      sum += c;
    }
    EXPECT_FLOAT_EQ(x.sum[b], x.scale[b] * sum);
  }
  EXPECT_EQ(x.scale[2], 0.0f);
}

TEST(QuantDot, BadShapesAreErrors) {
  QuantActs x;
  const std::vector<float> xf(40, 1.0f);
  expectError([&] { quantizeActs(xf.data(), 1, 40, 32, x); }, {"40 columns", "groups of 32"});
  const Quantized q = quantizeWeights(4, 32, 4, 64, 1);
  quantizeActs(xf.data(), 1, 32, 32, x);
  std::vector<float> y(4);
  expectError([&] { quantDot(q.weights, 0, 4, x, y.data(), 4); }, {"32 columns", "64"});
}

TEST(QuantDot, ActivationCodesAreNearbyintOfTheScaledValuesForEveryGroup) {
  // Groups of 8..64 take the SIMD quantizer on AVX2 CPUs, 12 the portable loop: both must give
  // nearbyint(x * 127 / amax) exactly, ties (here x = 63.5 for amax 127) to even.
  for (int64_t group : {8, 12, 16, 32, 64}) {
    std::vector<float> xf = gaussian(static_cast<size_t>(5 * group), static_cast<unsigned>(group));
    xf[0] = 127.0f;
    xf[1] = 63.5f;
    xf[2] = -0.5f;
    QuantActs x;
    quantizeActs(xf.data(), 5, group, group, x);
    for (int64_t b = 0; b < 5; ++b) {
      float amax = 0;
      for (int64_t i = 0; i < group; ++i) amax = std::max(amax, std::fabs(xf[static_cast<size_t>(b * group + i)]));
      int sum = 0;
      for (int64_t i = 0; i < group; ++i) {
        const size_t at = static_cast<size_t>(b * group + i);
        const int want = static_cast<int>(std::nearbyint(xf[at] * (127.0f / amax)));
        ASSERT_EQ(x.codes[at], want) << "group " << group << ", value " << xf[at];
        sum += want;
      }
      EXPECT_EQ(x.scale[static_cast<size_t>(b)], amax / 127.0f);
      EXPECT_EQ(x.sum[static_cast<size_t>(b)], amax / 127.0f * static_cast<float>(sum));
    }
    EXPECT_EQ(x.codes[1], 64);  // 63.5 rounds to even
  }
}
