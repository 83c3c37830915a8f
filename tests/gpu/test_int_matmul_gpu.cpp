// gpuops::intMatmul (out [m, n] I32 = a [m, k] I8 b [k, n] I8 on the INT8 matrix cores, the
// kernel gz_matmul_s8) against the exact product on the host (I64), at shapes that cross the
// kernel's 128 x 128 x 64 tiles and its 16 x 8 x 32 mma tiles on every side, with the extremes
// -128 and 127, k = 0, empty outputs, and rows that defeat the kernel's vector loads (k not a
// multiple of 16, n not a multiple of 4, unaligned starts). Run by ctest on the emulator at 8.9
// (mma.sync), 9.0 and 7.5 (the plain integer loop that AMD and older GPUs take); skipped without
// a GPU.
#include <gizml/tensor.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/gpu_checks.h"
#include "tensor/gpu/tensor_ops.h"

using namespace gizml;

namespace {

class GpuIntMatmul : public gizml::test::GpuTest {
 protected:
  // Random int8 values, one in eight at -128 or 127.
  static T::Tensor randomI8(uint32_t seed, const T::Shape& shape) {
    std::mt19937 rng(seed);
    std::vector<double> v(static_cast<size_t>(shape[0] * shape[1]));
    for (double& x : v) {
      const uint32_t r = rng();
      x = r % 8 == 0 ? (r & 8 ? -128.0 : 127.0) : static_cast<double>(static_cast<int>(r >> 8) % 256 - 128);
    }
    return T::tensor(shape, v, DType::I8);
  }

  // intMatmul of host a and b on the GPU, into an output filled beforehand with a value no
  // product here gives (so an element the kernel does not write shows).
  T::Tensor run(const T::Tensor& ga, const T::Tensor& gb) {
    const int64_t m = ga.shape()[0], n = gb.shape()[1];
    const T::Tensor out = T::full({m, n}, -987654321.0, DType::I32).on(gpu());
    gpuops::intMatmul(ga, gb, out);
    return out.host();
  }

  void expectExact(const T::Tensor& a, const T::Tensor& b, const T::Tensor& got, const std::string& what) {
    const int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
    ASSERT_EQ(got.dtype(), DType::I32) << what;
    ASSERT_EQ(got.shape(), (T::Shape{m, n})) << what;
    const std::vector<int64_t> g = got.toInts();
    std::vector<int64_t> want(static_cast<size_t>(m * n), 0);
    if (k > 0) want = T::matmul(a.cast(DType::I64), b.cast(DType::I64)).toInts();
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(g[i], want[i]) << what << ": element (" << i / n << ", " << i % n << ")";
  }

  void check(int64_t m, int64_t n, int64_t k, uint32_t seed) {
    const std::string what = "intMatmul (" + std::to_string(m) + ", " + std::to_string(n) + ", " + std::to_string(k) + ")";
    const auto a = randomI8(seed, {m, k}), b = randomI8(seed + 1, {k, n});
    expectExact(a, b, run(a.on(gpu()), b.on(gpu())), what);
  }
};

}  // namespace

TEST_F(GpuIntMatmul, TileAndFragmentEdges) {
  const int64_t shapes[][3] = {
      {1, 1, 1},     {16, 8, 32},    {33, 17, 70},  {100, 130, 300}, {128, 128, 64}, {129, 129, 65}, {2, 300, 48},
      {200, 3, 96},  {17, 9, 31},    {1, 256, 160}, {64, 64, 33},    {7, 131, 1},    {130, 4, 128},
  };
  uint32_t seed = 1;
  for (const auto& s : shapes) check(s[0], s[1], s[2], seed += 2);
}

TEST_F(GpuIntMatmul, LongK) { check(64, 64, 4096, 100); }

// All -128 times all -128 and times all 127: the largest products, every term alike.
TEST_F(GpuIntMatmul, Extremes) {
  const int64_t m = 40, n = 24, k = 1000;
  const auto low = T::full({m, k}, -128.0, DType::I8), lowB = T::full({k, n}, -128.0, DType::I8),
             high = T::full({k, n}, 127.0, DType::I8);
  const auto got = run(low.on(gpu()), lowB.on(gpu()));
  expectExact(low, lowB, got, "-128 x -128");
  EXPECT_EQ(got.toInts()[0], 128 * 128 * k);
  expectExact(low, high, run(low.on(gpu()), high.on(gpu())), "-128 x 127");
}

TEST_F(GpuIntMatmul, KZeroIsZerosAndEmptyOutputs) {
  const auto a = T::zeros({5, 0}, DType::I8), b = T::zeros({0, 7}, DType::I8);
  const auto got = run(a.on(gpu()), b.on(gpu()));
  EXPECT_EQ(got.toInts(), std::vector<int64_t>(35, 0));
  for (const auto& [m, n] : {std::pair<int64_t, int64_t>{0, 7}, {5, 0}, {0, 0}}) {
    const auto x = randomI8(9, {m, 3}), y = randomI8(10, {3, n});
    const T::Tensor out = T::zeros({m, n}, DType::I32).on(gpu());
    gpuops::intMatmul(x.on(gpu()), y.on(gpu()), out);
    EXPECT_EQ(out.host().numel(), 0);
  }
}

// Operands starting one byte into their storage: neither 16-byte A nor 4-byte B loads apply,
// even where k and n would allow them.
TEST_F(GpuIntMatmul, UnalignedOperands) {
  const int64_t m = 70, n = 136, k = 96;
  const auto a = randomI8(21, {m, k}), b = randomI8(22, {k, n});
  const auto pad = T::zeros({1}, DType::I8);
  const auto ga = T::concat({pad, a.reshape({m * k})}, 0).on(gpu()).slice(0, 1, 1 + m * k).reshape({m, k});
  const auto gb = T::concat({pad, b.reshape({k * n})}, 0).on(gpu()).slice(0, 1, 1 + k * n).reshape({k, n});
  ASSERT_TRUE(ga.isContiguous() && gb.isContiguous());
  EXPECT_NE(gpuops::address(ga) % 4, 0u);
  EXPECT_NE(gpuops::address(gb) % 4, 0u);
  expectExact(a, b, run(ga, gb), "unaligned operands");
}

TEST_F(GpuIntMatmul, WrongOperandsAreErrors) {
  const auto a = randomI8(31, {4, 8}).on(gpu()), b = randomI8(32, {8, 5}).on(gpu());
  const auto out = T::zeros({4, 5}, DType::I32).on(gpu());
  EXPECT_THROW(gpuops::intMatmul(a, randomI8(33, {7, 5}).on(gpu()), out), Error);       // k differs
  EXPECT_THROW(gpuops::intMatmul(a, b, T::zeros({4, 6}, DType::I32).on(gpu())), Error);  // out's shape
  EXPECT_THROW(gpuops::intMatmul(a, b, T::zeros({4, 5}, DType::I64).on(gpu())), Error);  // out's dtype
  EXPECT_THROW(gpuops::intMatmul(a.cast(DType::I32), b, out), Error);                    // a's dtype
  EXPECT_THROW(gpuops::intMatmul(a, b.transpose(0, 1).contiguous().transpose(0, 1), out), Error);  // b strided
  EXPECT_THROW(gpuops::intMatmul(a.host(), b, out), Error);                                       // a on the host
}
