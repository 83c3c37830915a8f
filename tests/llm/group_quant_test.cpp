// Our group format: exactness where it can be exact, error falling with bits, and 4-bit error
// on Gaussian weights against GGUF Q4_K at its 4.5 bits per weight; QuantizedMatrix's product.
#include "llm/quant/group_quant.h"

#include <gizml/tensor.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "cpu/quant_dot.h"
#include "llm/json_fields.h"
#include "llm_test_util.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

double roundTripError(const GroupFormat& f, const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<uint8_t> q(static_cast<size_t>(rows * groupRowBytes(f, cols)));
  const float base = quantizeGroups(f, x.data(), rows, cols, q.data());
  std::vector<float> y(x.size());
  dequantizeGroups(f, base, q.data(), rows, cols, y.data());
  double err = 0, norm = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
    norm += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(err / norm);
}

TEST(GroupQuant, ZeroAndConstantGroupsAreExact) {
  const GroupFormat f{4, 32};
  std::vector<float> x(64 * 3, 0.0f);
  for (int i = 64; i < 128; ++i) x[static_cast<size_t>(i)] = 0.5f;
  for (int i = 128; i < 192; ++i) x[static_cast<size_t>(i)] = i % 2 ? 1.0f : -1.0f;
  std::vector<uint8_t> q(static_cast<size_t>(3 * groupRowBytes(f, 64)));
  const float base = quantizeGroups(f, x.data(), 3, 64, q.data());
  std::vector<float> y(x.size());
  dequantizeGroups(f, base, q.data(), 3, 64, y.data());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(y[static_cast<size_t>(i)], 0.0f) << i;
  for (int i = 64; i < 192; ++i) EXPECT_NEAR(y[static_cast<size_t>(i)], x[static_cast<size_t>(i)], 0.02f) << i;
}

TEST(GroupQuant, ErrorHalvesPerBit) {
  const int64_t rows = 64, cols = 256;
  const std::vector<float> x = tensor::normal(tensor::Key(7), {rows, cols}).toFloats();
  double previous = 1.0;
  for (int bits = 2; bits <= 8; ++bits) {
    const double err = roundTripError({bits, 32}, x, rows, cols);
    EXPECT_LT(err, previous * (bits == 2 ? 1.0 : 0.6)) << bits;
    previous = err;
  }
  EXPECT_LT(previous, 0.01);
}

TEST(GroupQuant, BadFormatsAreErrors) {
  expectError([] { checkGroupFormat({9, 32}, "--bits"); }, {"--bits", "2..8"});
  expectError([] { checkGroupFormat({4, 20}, "--group"); }, {"--group", "multiple of 8"});
  std::vector<float> x(40);
  std::vector<uint8_t> q(100);
  expectError([&] { quantizeGroups({4, 32}, x.data(), 1, 40, q.data()); }, {"40 columns"});
}

// The bar: 4 bits on N(0, 1) weights at no more error than Q4_K, at no more bits.
TEST(GroupQuant, FourBitsBeatQ4KOnGaussianWeights) {
  const JsonFields ref = JsonFields::read(llmData("q4k_gaussian.json"));
  // A quarter of the reference's rows: the same distribution, a quarter of the time (sanitizers).
  const int64_t rows = ref.getInt("rows") / 4, cols = ref.getInt("cols");
  const std::vector<float> x = tensor::normal(tensor::Key(2024), {rows, cols}).toFloats();
  const GroupFormat f{4, 32};
  const double ours = roundTripError(f, x, rows, cols);
  const double bpw = 8.0 * static_cast<double>(groupRowBytes(f, cols)) / static_cast<double>(cols);
  const double q4k = ref.getFloat("relative_rms_error");
  std::printf("4-bit relative RMS error on N(0,1) %lldx%lld: ours %.5f at %.3f bits/weight, Q4_K %.5f at %.3f\n",
              static_cast<long long>(rows), static_cast<long long>(cols), ours, bpw, q4k,
              ref.getFloat("bits_per_weight"));
  EXPECT_LE(bpw, ref.getFloat("bits_per_weight"));
  EXPECT_LE(ours, q4k);
}

}  // namespace

// QuantizedMatrix gives the bits of the portable kernel (cpu::quantMatmul, the reference of every
// ISA's panels) on activations quantized as a linear layer quantizes them, each row's outputs
// the same whatever rows go with it: every width, a row count that is no whole number of panels.
TEST(GroupQuant, QuantizedMatrixIsThePortableKernelsProduct) {
  const int64_t rows = 37, cols = 128, n = 5;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(n * cols));
  for (float& v : w) v = dist(rng);
  for (float& v : x) v = dist(rng);
  for (const GroupFormat f : {GroupFormat{2, 32}, GroupFormat{3, 64}, GroupFormat{4, 32}, GroupFormat{5, 128},
                              GroupFormat{6, 32}, GroupFormat{7, 64}, GroupFormat{8, 32}}) {
    SCOPED_TRACE(std::to_string(f.bits) + " bits, groups of " + std::to_string(f.group));
    const int64_t rowBytes = groupRowBytes(f, cols);
    std::vector<uint8_t> q(static_cast<size_t>(rows * rowBytes));
    const float base = quantizeGroups(f, w.data(), rows, cols, q.data());
    const QuantizedMatrix matrix(f, base, q.data(), rows, cols);
    EXPECT_EQ(matrix.rows(), rows);
    EXPECT_EQ(matrix.cols(), cols);
    std::vector<float> y(static_cast<size_t>(n * rows)), want(y.size());
    matrix.matmul(x.data(), n, y.data());

    std::array<float, 256> scales;
    for (int e = 0; e < 256; ++e) scales[static_cast<size_t>(e)] = groupScale(base, e);
    cpu::QuantActs acts;
    cpu::quantizeActs(x.data(), n, cols, f.group, acts);
    cpu::quantMatmul({q.data(), rows, cols, rowBytes, f.bits, f.group, scales.data()}, acts, want.data());
    EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * 4), 0);

    std::vector<float> alone(static_cast<size_t>(rows));
    for (int64_t r = 0; r < n; ++r) {
      matrix.matmul(x.data() + r * cols, 1, alone.data());
      EXPECT_EQ(std::memcmp(alone.data(), y.data() + r * rows, alone.size() * 4), 0) << "row " << r;
    }
  }
}

// matmulAll's products, from one quantization of x shared by matrices of several widths and
// row counts, are each the bits of the matrix's own matmul.
TEST(GroupQuant, MatmulAllGivesTheBitsOfEachMatmul) {
  const int64_t cols = 128, n = 3;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (float& v : x) v = dist(rng);
  const std::vector<std::pair<GroupFormat, int64_t>> shapes{{{4, 32}, 37}, {{6, 32}, 8}, {{8, 32}, 21}, {{3, 32}, 5}};
  std::vector<std::vector<uint8_t>> stored;
  std::vector<QuantizedMatrix> matrices;
  for (const auto& [f, rows] : shapes) {
    std::vector<float> w(static_cast<size_t>(rows * cols));
    for (float& v : w) v = dist(rng);
    stored.emplace_back(static_cast<size_t>(rows * groupRowBytes(f, cols)));
    const float base = quantizeGroups(f, w.data(), rows, cols, stored.back().data());
    matrices.emplace_back(f, base, stored.back().data(), rows, cols);
  }
  std::vector<const QuantizedMatrix*> all;
  std::vector<std::vector<float>> ys;
  std::vector<float*> outputs;
  for (const QuantizedMatrix& m : matrices) all.push_back(&m), ys.emplace_back(static_cast<size_t>(n * m.rows()));
  for (auto& y : ys) outputs.push_back(y.data());
  matmulAll(all, x.data(), n, outputs);
  for (size_t i = 0; i < matrices.size(); ++i) {
    std::vector<float> alone(ys[i].size());
    matrices[i].matmul(x.data(), n, alone.data());
    EXPECT_EQ(std::memcmp(alone.data(), ys[i].data(), alone.size() * 4), 0) << "matrix " << i;
  }

  std::vector<uint8_t> q(static_cast<size_t>(2 * groupRowBytes({4, 64}, cols)));
  const QuantizedMatrix otherGroup({4, 64}, 1.0f, q.data(), 2, cols);
  std::vector<float> y(static_cast<size_t>(n * 2));
  expectError([&] { matmulAll({all[0], &otherGroup}, x.data(), n, {outputs[0], y.data()}); }, {"groups of 64"});
  expectError([&] { matmulAll(all, x.data(), n, {outputs[0]}); }, {"matmulAll", "one output per matrix"});
}

TEST(GroupQuant, QuantizedMatrixChecksItsFormat) {
  std::vector<uint8_t> q(1000);
  expectError([&] { QuantizedMatrix({9, 32}, 1.0f, q.data(), 2, 64); }, {"QuantizedMatrix", "2..8"});
  expectError([&] { QuantizedMatrix({4, 20}, 1.0f, q.data(), 2, 40); }, {"QuantizedMatrix", "multiple of 8"});
  expectError([&] { QuantizedMatrix({4, 32}, 1.0f, q.data(), 2, 40); }, {"40 columns", "groups of 32"});
}
