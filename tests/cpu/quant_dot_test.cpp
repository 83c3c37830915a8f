// The int8 x group-quantized dot kernels (cpu/quant_dot.h) against a double-precision reference:
// the weights dequantized by group_quant's own decoder times the activations as their int8 codes
// decode, on odd sizes (tails of the register tiles and of the 16-row blocks), every bit width
// 2..8 and groups 8..128, for each kernel this CPU runs (the AVX-VNNI one is skipped on CPUs
// without it, as our AMD Zen 3). Also the activation quantizer's rounding and its errors.
#include "cpu/quant_dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/expect_error.h"
#include "llm/quant/group_quant.h"

using namespace gizml;
using namespace gizml::cpu;

namespace {

std::vector<float> gaussian(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Quantized {
  std::vector<uint8_t> bytes;
  std::vector<float> scales = std::vector<float>(256);
  std::vector<float> dequantized;  // by group_quant's decoder
  QuantWeights weights;
};

Quantized quantizeWeights(int bits, int64_t group, int64_t rows, int64_t cols, unsigned seed) {
  const llm::GroupFormat f{bits, group};
  Quantized q;
  std::vector<float> w = gaussian(static_cast<size_t>(rows * cols), seed);
  // Rows of different magnitudes and offsets, so that scales and zero points vary.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) w[static_cast<size_t>(r * cols + c)] = w[static_cast<size_t>(r * cols + c)] * (1.0f + static_cast<float>(r % 5)) + 0.3f * static_cast<float>(r % 3);
  const int64_t rowBytes = llm::groupRowBytes(f, cols);
  q.bytes.resize(static_cast<size_t>(rows * rowBytes));
  const float base = llm::quantizeGroups(f, w.data(), rows, cols, q.bytes.data());
  for (int e = 0; e < 256; ++e) q.scales[static_cast<size_t>(e)] = llm::groupScale(base, e);
  q.dequantized.resize(w.size());
  llm::dequantizeGroups(f, base, q.bytes.data(), rows, cols, q.dequantized.data());
  q.weights = QuantWeights{q.bytes.data(), rows, cols, rowBytes, bits, group, q.scales.data()};
  return q;
}

// Runs kernel k over output rows [o0, o1) and compares with the double reference.
void expectMatchesReference(QuantKernel k, const Quantized& q, const QuantActs& x, int64_t o0, int64_t o1) {
  const int64_t out = q.weights.rows, cols = q.weights.cols, groups = cols / x.group;
  std::vector<float> y(static_cast<size_t>(x.rows * out), -7.0f);
  quantDot(k, q.weights, o0, o1, x, y.data(), out);
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      const float got = y[static_cast<size_t>(r * out + o)];
      if (o < o0 || o >= o1) {
        ASSERT_EQ(got, -7.0f) << "row " << o << " outside the range was written";
        continue;
      }
      double want = 0, magnitude = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double a = static_cast<double>(x.scale[static_cast<size_t>(r * groups + c / x.group)]) *
                         x.codes[static_cast<size_t>(r * cols + c)];
        const double w = q.dequantized[static_cast<size_t>(o * cols + c)];
        want += w * a;
        magnitude += std::fabs(w * a);
      }
      // f32 accumulation of per-group terms, and the dequantizer's own f32 rounding.
      ASSERT_NEAR(got, want, 2e-6 * magnitude + 1e-6) << "activation row " << r << ", output row " << o;
    }
}

std::vector<QuantKernel> kernelsFor(int64_t group) {
  std::vector<QuantKernel> ks;
  for (QuantKernel k : {QuantKernel::Scalar, QuantKernel::Avx2, QuantKernel::AvxVnni})
    if (quantKernelSupported(k, group)) ks.push_back(k);
  return ks;
}

const char* kernelName(QuantKernel k) {
  return k == QuantKernel::Scalar ? "scalar" : k == QuantKernel::Avx2 ? "avx2" : "avx-vnni";
}

}  // namespace

TEST(QuantDot, EveryKernelBitWidthAndGroupMatchesDoubleReference) {
  for (int64_t group : {8, 16, 24, 32, 64, 128})
    for (int bits = 2; bits <= 8; ++bits) {
      // 37 output rows: two 16-row blocks and a tail of 5 (one 4-row tile and one row).
      const int64_t out = 37, cols = group * 3, rows = 5;
      const Quantized q = quantizeWeights(bits, group, out, cols, static_cast<unsigned>(bits * 131 + group));
      std::vector<float> xf = gaussian(static_cast<size_t>(rows * cols), static_cast<unsigned>(group + bits));
      for (size_t i = 0; i < xf.size(); i += 7) xf[i] *= 20.0f;  // outliers, as in real activations
      QuantActs x;
      quantizeActs(xf.data(), rows, cols, group, x);
      for (QuantKernel k : kernelsFor(group)) {
        SCOPED_TRACE(std::string(kernelName(k)) + ", " + std::to_string(bits) + " bits, group " + std::to_string(group));
        expectMatchesReference(k, q, x, 0, out);
        expectMatchesReference(k, q, x, 3, 22);
      }
    }
}

TEST(QuantDot, SimdKernelsRunOnThisCpuForGroupsOf32) {
  // Our machines have AVX2 (AMD Zen 3): the fast path must not silently fall back to scalar.
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "no AVX2 on this CPU";
  EXPECT_TRUE(quantKernelSupported(QuantKernel::Avx2, 64));
  EXPECT_FALSE(quantKernelSupported(QuantKernel::Avx2, 16));
  EXPECT_NE(bestQuantKernel(32), QuantKernel::Scalar);
  EXPECT_EQ(bestQuantKernel(24), QuantKernel::Scalar);
}

TEST(QuantDot, MatmulEqualsTheKernelOnEveryRow) {
  const Quantized q = quantizeWeights(4, 32, 70, 96, 5);
  const std::vector<float> xf = gaussian(static_cast<size_t>(9 * 96), 6);
  QuantActs x;
  quantizeActs(xf.data(), 9, 96, 32, x);
  std::vector<float> all(static_cast<size_t>(9 * 70)), each(all.size());
  quantMatmul(q.weights, x, all.data());
  quantDot(bestQuantKernel(32), q.weights, 0, 70, x, each.data(), 70);
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
  expectError([&] { quantDot(QuantKernel::Scalar, q.weights, 0, 4, x, y.data(), 4); }, {"32 columns", "64"});
}
