// The GPU's tensor-core products (llm/ops/gpu: gz_lm_half_rows, gz_lm_group_mma16/64 over
// group-format rows, gz_lm_half_mma16/64 over 16-bit ones), against the same rows (dequantized)
// multiplied in double on the CPU, and a row's bits against the same row multiplied beside others. On the first GPU, in CI the host GPU emulator (ctest
// emulator_test_llm); skipped where there is none.
#include <gizml/group_quant.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/gpu_checks.h"
#include "llm/ops/gpu/model_ops_gpu.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

// Weights [out, in] in the group format, on the GPU, and the values they stand for.
struct GroupRows {
  GroupFormat format;
  int64_t out = 0, in = 0, rowBytes = 0;
  float base = 0;
  std::vector<float> values;  // dequantized, [out, in]
  tensor::Tensor onGpu;       // U8 [out * rowBytes]
};

class GpuModelLinear : public test::GpuTest {
 protected:
  GroupRows rows(const GroupFormat& format, int64_t out, int64_t in, uint32_t seed) {
    GroupRows w;
    w.format = format;
    w.out = out;
    w.in = in;
    w.rowBytes = groupRowBytes(format, in);
    std::vector<float> source(static_cast<size_t>(out * in));
    for (size_t i = 0; i < source.size(); ++i) {
      // Rows of different scales, so that the groups' exponents differ.
      const double scale = std::pow(10.0, static_cast<double>((i / static_cast<size_t>(in)) % 4) - 3.0);
      source[i] = static_cast<float>(scale * std::sin(0.61 * static_cast<double>(i) + seed));
    }
    std::vector<uint8_t> bytes(static_cast<size_t>(out * w.rowBytes));
    w.base = quantizeGroups(format, source.data(), out, in, bytes.data());
    w.values.resize(source.size());
    dequantizeGroups(format, w.base, bytes.data(), out, in, w.values.data());
    std::vector<double> asDoubles(bytes.begin(), bytes.end());
    w.onGpu = on(T::tensor({static_cast<int64_t>(bytes.size())}, asDoubles, DType::U8));
    return w;
  }

  // x [n, in]: each row of its own magnitude (1e-3 .. 1e4), one row all zeros.
  static std::vector<double> activations(int64_t n, int64_t in) {
    std::vector<double> x(static_cast<size_t>(n * in));
    for (int64_t r = 0; r < n; ++r) {
      const double magnitude = r == 2 ? 0.0 : std::pow(10.0, static_cast<double>(r % 8) - 3.0);
      for (int64_t k = 0; k < in; ++k)
        x[static_cast<size_t>(r * in + k)] = magnitude * std::cos(0.37 * static_cast<double>(k * (r + 1)) + 0.1 * r);
    }
    return x;
  }

  // y [n, out] on the GPU for the first n rows of x.
  std::vector<float> product(const GroupRows& w, const std::vector<double>& x, int64_t n, const tensor::Tensor& bias) {
    const std::vector<double> first(x.begin(), x.begin() + n * w.in);
    const tensor::Tensor xs = on(T::tensor({n, w.in}, first));
    const tensor::Tensor y = on(T::zeros({n, w.out}));
    ops::gpu::groupMatmul(xs, w.onGpu, bias, y, n, w.out, w.in, w.rowBytes, w.format.bits,
                          static_cast<int>(w.format.group), w.base);
    return y.toFloats();
  }
};

// Every product within the F16 rounding of both operands: each term x w is off by at most
// about 2^-10 of |x w| (11 bits each), plus F16's subnormal steps for the smallest weights.
TEST_F(GpuModelLinear, GroupRowsMatchTheirDequantizedProduct) {
  const int64_t n = 70, out = 21;
  for (const GroupFormat format : {GroupFormat{4, 32}, GroupFormat{2, 8}, GroupFormat{3, 16}, GroupFormat{6, 64},
                                   GroupFormat{8, 32}, GroupFormat{5, 8}}) {
    for (const int64_t in : {int64_t{64}, format.group == 8 ? int64_t{40} : format.group * 3}) {
      SCOPED_TRACE("bits " + std::to_string(format.bits) + ", group " + std::to_string(format.group) + ", in " +
                   std::to_string(in));
      const GroupRows w = rows(format, out, in, 7);
      std::vector<double> biasValues(static_cast<size_t>(out));
      for (int64_t o = 0; o < out; ++o) biasValues[static_cast<size_t>(o)] = 0.25 * static_cast<double>(o) - 2.0;
      const std::vector<double> x = activations(n, in);
      const std::vector<float> got = product(w, x, n, on(T::tensor({out}, biasValues)));
      ASSERT_EQ(got.size(), static_cast<size_t>(n * out));
      for (int64_t r = 0; r < n; ++r)
        for (int64_t o = 0; o < out; ++o) {
          double want = biasValues[static_cast<size_t>(o)], size = 0, xSize = 0;
          for (int64_t k = 0; k < in; ++k) {
            const double xv = x[static_cast<size_t>(r * in + k)], wv = w.values[static_cast<size_t>(o * in + k)];
            want += xv * wv;
            size += std::fabs(xv * wv);
            xSize += std::fabs(xv);
          }
          const double bound = 1.2e-3 * size + std::ldexp(static_cast<double>(w.base), -24) * xSize + 1e-6;
          EXPECT_NEAR(got[static_cast<size_t>(r * out + o)], want, bound) << "row " << r << ", output " << o;
        }
    }
  }
}

// A row's outputs are the same bits alone, in a tile of 16 rows and in one of 64, wherever it
// sits: what batched decode and a prompt read in parts rely on.
TEST_F(GpuModelLinear, ARowGivesItsBitsWhateverIsBesideIt) {
  const int64_t in = 96, out = 37, n = 70;
  const GroupRows w = rows(GroupFormat{4, 32}, out, in, 3);
  const std::vector<double> x = activations(n, in);
  const tensor::Tensor noBias;
  const std::vector<float> all = product(w, x, n, noBias);
  for (const int64_t first : {int64_t{0}, int64_t{5}, int64_t{33}, int64_t{69}}) {
    for (const int64_t count : {int64_t{1}, int64_t{16}, int64_t{17}}) {
      if (first + count > n) continue;
      const std::vector<double> some(x.begin() + first * in, x.end());
      const std::vector<float> got = product(w, some, count, noBias);
      EXPECT_EQ(0, std::memcmp(got.data(), all.data() + first * out, got.size() * sizeof(float)))
          << count << " rows from row " << first;
    }
  }
}

// 16-bit rows (F16, BF16) in the layout halfWeights makes and their product: within f32's
// rounding of the double product over the stored values, and a row's bits whatever is beside it.
// An odd width too: the F16 rows are laid out one longer, with a zero.
TEST_F(GpuModelLinear, SixteenBitRowsMatchTheirProductAndKeepTheirBits) {
  const int64_t n = 70, out = 19;
  for (const auto& [type, width] : {std::pair{DType::F16, int64_t{72}}, std::pair{DType::BF16, int64_t{72}},
                                     std::pair{DType::BF16, int64_t{71}}}) {
    const DType dtype = type;
    const int64_t in = width;  // a plain variable: lambdas below capture it (clang 14 cannot capture bindings)
    SCOPED_TRACE(std::string(dtypeName(dtype)) + ", in " + std::to_string(in));
    const std::vector<double> x = activations(n, in);
    std::vector<double> values(static_cast<size_t>(out * in));
    for (size_t i = 0; i < values.size(); ++i) {
      const double scale = std::pow(10.0, static_cast<double>((i / static_cast<size_t>(in)) % 5) - 4.0);
      values[i] = scale * std::sin(0.83 * static_cast<double>(i) + 1.0);
    }
    const tensor::Tensor stored = T::tensor({out, in}, values, dtype);
    const std::vector<float> w = stored.toFloats();  // the stored values
    const ops::gpu::HalfWeights half = ops::gpu::halfWeights(on(stored), out, in);
    const auto productOf = [&](const std::vector<double>& rows, int64_t count) {
      const tensor::Tensor xs = on(T::tensor({count, in}, std::vector<double>(rows.begin(), rows.begin() + count * in)));
      const tensor::Tensor y = on(T::zeros({count, out}));
      ops::gpu::halfMatmul(xs, half, tensor::Tensor(), y, count, out, in);
      return y.toFloats();
    };
    const std::vector<float> all = productOf(x, n);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t o = 0; o < out; ++o) {
        double want = 0, size = 0;
        for (int64_t k = 0; k < in; ++k) {
          const double term = x[static_cast<size_t>(r * in + k)] * w[static_cast<size_t>(o * in + k)];
          want += term;
          size += std::fabs(term);
        }
        // The weights are F16's exactly; x keeps 22 bits (its F16 and the rest): f32's error, not F16's.
        EXPECT_NEAR(all[static_cast<size_t>(r * out + o)], want, 2e-6 * size + 1e-30) << "row " << r << ", output " << o;
      }
    for (const int64_t first : {int64_t{3}, int64_t{40}}) {
      const std::vector<float> one = productOf(std::vector<double>(x.begin() + first * in, x.end()), 1);
      EXPECT_EQ(0, std::memcmp(one.data(), all.data() + first * out, one.size() * sizeof(float))) << "row " << first;
    }
  }
}

}  // namespace

namespace {

// Layers reading one input (q, k and v; gate and up) through products(): x made F16 once for a
// group layer and a 16-bit one together (which also reads what F16 left), with and without a
// bias, each output the bits of the layer's own product, at decode's tile (3 rows) and prefill's (70).
TEST_F(GpuModelLinear, LayersReadingOneInputGiveTheBitsOfEachAlone) {
  const int64_t in = 96;
  const GroupRows group = rows(GroupFormat{4, 32}, 37, in, 5);
  std::vector<double> values(static_cast<size_t>(19 * in));
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.71 * static_cast<double>(i));
  const ops::gpu::HalfWeights half = ops::gpu::halfWeights(on(T::tensor({19, in}, values, DType::BF16)), 19, in);
  std::vector<double> biasValues(37);
  for (size_t o = 0; o < biasValues.size(); ++o) biasValues[o] = 0.5 * static_cast<double>(o) - 3.0;
  const tensor::Tensor bias = on(T::tensor({37}, biasValues));
  for (const int64_t n : {int64_t{3}, int64_t{70}}) {
    const tensor::Tensor x = on(T::tensor({n, in}, activations(n, in)));
    const tensor::Tensor groupAlone = on(T::zeros({n, 37})), halfAlone = on(T::zeros({n, 19}));
    ops::gpu::groupMatmul(x, group.onGpu, bias, groupAlone, n, 37, in, group.rowBytes, 4, 32, group.base);
    ops::gpu::halfMatmul(x, half, tensor::Tensor(), halfAlone, n, 19, in);
    const tensor::Tensor groupTogether = on(T::zeros({n, 37})), halfTogether = on(T::zeros({n, 19}));
    ops::gpu::ProductRows groupRows{ops::gpu::ProductRows::Kind::Group, group.onGpu, {}, group.rowBytes, 4, 32,
                                    group.base};
    ops::gpu::ProductRows halfRows{ops::gpu::ProductRows::Kind::Half, half.rows, half.scales};
    ops::gpu::products(x, {{groupRows, bias, groupTogether, 37}, {halfRows, tensor::Tensor(), halfTogether, 19}}, n,
                       in);
    EXPECT_EQ(groupTogether.toFloats(), groupAlone.toFloats()) << n << " rows";
    EXPECT_EQ(halfTogether.toFloats(), halfAlone.toFloats()) << n << " rows";
  }
}

}  // namespace
