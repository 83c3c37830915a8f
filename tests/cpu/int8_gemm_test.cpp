// int8Gemm (cpu/int8_gemm.h): every ISA's kernel gives the exact integer product, bit for bit the
// portable loop's and the I64 matmul's (wrapped to i32): shapes that leave every micro-tile tail
// (rows, weight rows, the k left past a whole word, k = 0, k in several of the kernels' pieces),
// random bytes with the extremes -128 and 127 over-represented, all -128 (the case maddubs' int16
// pairs would saturate), sums past 2^31, and T::intMatmul's reading of a transposed view in place.
#include "cpu/int8_gemm.h"

#include <gizml/tensor.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "common/expect_error.h"
#include "cpu/isa_param.h"

using namespace gizml;
using namespace gizml::cpu;
namespace T = gizml::tensor;

namespace {

std::vector<int8_t> randomBytes(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int8_t> v(static_cast<size_t>(count));
  for (auto& x : v) {
    const uint32_t r = rng();
    x = r % 8 == 0 ? int8_t{-128} : r % 8 == 1 ? int8_t{127} : static_cast<int8_t>(r >> 8);
  }
  return v;
}

T::Tensor bytesTensor(const std::vector<int8_t>& values, const T::Shape& shape) {
  T::Tensor t = T::empty(shape, DType::I8);
  std::copy(values.begin(), values.end(), t.data<int8_t>());
  return t;
}

// The exact product through the I64 matmul, wrapped to i32 as two's complement.
std::vector<int32_t> exactProduct(const std::vector<int8_t>& a, const std::vector<int8_t>& w, int64_t m, int64_t n,
                                  int64_t k) {
  const T::Tensor at = bytesTensor(a, {m, k}).cast(DType::I64);
  const T::Tensor wt = bytesTensor(w, {n, k}).cast(DType::I64);
  const T::Tensor c = T::matmul(at, wt.transpose(0, 1)).contiguous();
  std::vector<int32_t> out(static_cast<size_t>(m * n));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int32_t>(static_cast<uint32_t>(c.data<int64_t>()[i]));
  return out;
}

void expectExact(Isa isa, int64_t m, int64_t n, int64_t k, const std::vector<int8_t>& a, const std::vector<int8_t>& w) {
  SCOPED_TRACE(std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k));
  std::vector<int32_t> got(static_cast<size_t>(m * n), 0x5a5a5a5a);
  int8Gemm(m, n, k, a.data(), k, w.data(), k, got.data(), n, isa);
  const std::vector<int32_t> want = exactProduct(a, w, m, n, k);
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << "row " << static_cast<int64_t>(i) / n << ", column " << static_cast<int64_t>(i) % n;
}

class Int8GemmIsa : public test::IsaTest {};

}  // namespace

INSTANTIATE_TEST_SUITE_P(Kernels, Int8GemmIsa, ::testing::Values(Isa::Avx2, Isa::AvxVnni, Isa::Avx512Vnni),
                         test::isaParamName);

TEST_P(Int8GemmIsa, EveryTailIsTheExactProduct) {
  uint32_t seed = 1;
  for (int64_t m : {1, 2, 3, 5, 9, 67})
    for (int64_t n : {1, 4, 7, 13, 70})
      for (int64_t k : {0, 1, 2, 3, 5, 15, 16, 33, 64, 100, 256, 321}) {
        const auto a = randomBytes(m * k, seed++), w = randomBytes(n * k, seed++);
        expectExact(GetParam(), m, n, k, a, w);
      }
}

TEST_P(Int8GemmIsa, ExtremesAndSumsPastTwoToThe31Wrap) {
  // -128 x -128 = 16384 in every product: k = 2^17 + 100 sums past 2^31 and wraps.
  const int64_t m = 5, n = 6, k = (int64_t{1} << 17) + 100;
  const std::vector<int8_t> a(static_cast<size_t>(m * k), -128), w(static_cast<size_t>(n * k), -128);
  expectExact(GetParam(), m, n, k, a, w);
  const auto mixed = randomBytes(n * k, 7);
  expectExact(GetParam(), m, n, k, a, mixed);
}

TEST_P(Int8GemmIsa, BlocksOfManyRowsInParallel) {
  // More than one 64-row block and one weight block, with a k that leaves few weight rows a block.
  const int64_t m = 150, n = 90, k = 4100;
  expectExact(GetParam(), m, n, k, randomBytes(m * k, 11), randomBytes(n * k, 12));
}

TEST(Int8Gemm, PortableIsTheExactProductAndStridesAreRowStrides) {
  const int64_t m = 7, n = 5, k = 40;
  const auto a = randomBytes(m * k, 3), w = randomBytes(n * k, 4);
  expectExact(Isa::Portable, m, n, k, a, w);
  // Rows further apart than k: the first k of each row of a wider buffer.
  const int64_t lda = 50, ldw = 45, ldc = 9;
  std::vector<int8_t> wideA(static_cast<size_t>(m * lda), 99), wideW(static_cast<size_t>(n * ldw), 99);
  for (int64_t i = 0; i < m; ++i) std::copy_n(a.begin() + i * k, k, wideA.begin() + i * lda);
  for (int64_t j = 0; j < n; ++j) std::copy_n(w.begin() + j * k, k, wideW.begin() + j * ldw);
  std::vector<int32_t> got(static_cast<size_t>(m * ldc), 0);
  int8Gemm(m, n, k, wideA.data(), lda, wideW.data(), ldw, got.data(), ldc);
  const auto want = exactProduct(a, w, m, n, k);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      EXPECT_EQ(got[static_cast<size_t>(i * ldc + j)], want[static_cast<size_t>(i * n + j)]);
}

TEST(IntMatmul, ReadsTransposedWeightsInPlaceAndChecksItsOperands) {
  const int64_t m = 6, n = 11, k = 70;
  const auto a = randomBytes(m * k, 21), w = randomBytes(n * k, 22);
  const T::Tensor at = bytesTensor(a, {m, k});
  const T::Tensor rows = bytesTensor(w, {n, k});
  const auto want = exactProduct(a, w, m, n, k);
  for (const T::Tensor& b : {rows.transpose(0, 1), rows.transpose(0, 1).contiguous()}) {
    const T::Tensor c = T::intMatmul(at, b);
    ASSERT_EQ(c.dtype(), DType::I32);
    ASSERT_EQ(c.shape(), (T::Shape{m, n}));
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(c.data<int32_t>()[i], want[i]);
  }
  // A column view of a as the left operand (rows not contiguous): copied, the same product.
  const T::Tensor wide = bytesTensor(randomBytes(m * 2 * k, 23), {m, 2 * k});
  const T::Tensor left = wide.slice(1, 0, k);
  const T::Tensor got = T::intMatmul(left, rows.transpose(0, 1));
  const T::Tensor exact = T::matmul(left.cast(DType::I64), rows.transpose(0, 1).cast(DType::I64)).cast(DType::I32);
  EXPECT_EQ(got.toInts(), exact.toInts());
  expectError([&] { T::intMatmul(at.cast(DType::I32), rows.transpose(0, 1)); }, {"intMatmul: operands [6, 70] i32"});
  expectError([&] { T::intMatmul(at, rows); }, {"are not i8 matrices [m, k] and [k, n]"});
}
