// cpu::sgemm against two references: a plain loop that follows the order of additions
// documented in gemm.h (the results must match it bit for bit, which also shows they do not
// depend on the thread count or SIMD target), and a double-precision product (a check on the
// reference itself, within the usual rounding bound).
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/elementwise.h"
#include "cpu/gemm.h"

namespace gizml::cpu {
namespace {

enum class Layout { RowMajor, Transposed, Strided };

// A rows x cols operand stored in one of the layouts; element (i, j) is at ptr[i * rs + j * cs].
struct Operand {
  std::vector<float> data;
  int64_t rs = 0, cs = 0;
  float at(int64_t i, int64_t j) const { return data[i * rs + j * cs]; }
};

Operand makeOperand(int64_t rows, int64_t cols, Layout layout, std::mt19937& rng) {
  Operand o;
  switch (layout) {
    case Layout::RowMajor: o.rs = cols, o.cs = 1; break;
    case Layout::Transposed: o.rs = 1, o.cs = rows; break;
    case Layout::Strided: o.rs = 2 * cols + 3, o.cs = 2; break;  // every other column, padded rows
  }
  o.data.assign(static_cast<size_t>((rows - 1) * o.rs + (cols - 1) * o.cs + 1), 0.0f);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& v : o.data) v = dist(rng);
  return o;
}

struct Case {
  int64_t m, n, k;
  Layout a, b;
  bool accumulate;
  int64_t ldcPad;
};

void check(const Case& cs) {
  SCOPED_TRACE(testing::Message() << "m=" << cs.m << " n=" << cs.n << " k=" << cs.k << " layouts "
                                  << int(cs.a) << int(cs.b) << " accumulate=" << cs.accumulate);
  std::mt19937 rng(static_cast<unsigned>(cs.m * 131 + cs.n * 17 + cs.k));
  const Operand a = makeOperand(cs.m, cs.k, cs.a, rng), b = makeOperand(cs.k, cs.n, cs.b, rng);
  const int64_t ldc = cs.n + cs.ldcPad;
  std::vector<float> c0(static_cast<size_t>(cs.m * ldc));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& v : c0) v = dist(rng);

  std::vector<float> c = c0;
  sgemm(cs.m, cs.n, cs.k, a.data.data(), a.rs, a.cs, b.data.data(), b.rs, b.cs, c.data(), ldc,
        cs.accumulate);

  // The documented order: an fma chain from +0 per k block, the blocks added to C in order.
  std::vector<float> ordered = c0;
  for (int64_t i = 0; i < cs.m; ++i)
    for (int64_t j = 0; j < cs.n; ++j) {
      float& out = ordered[i * ldc + j];
      for (int64_t k0 = 0; k0 < cs.k; k0 += kGemmKc) {
        float acc = 0.0f;
        for (int64_t p = k0; p < std::min(cs.k, k0 + kGemmKc); ++p) acc = std::fma(a.at(i, p), b.at(p, j), acc);
        out = (cs.accumulate || k0 > 0) ? out + acc : acc;
      }
    }
  EXPECT_EQ(std::memcmp(c.data(), ordered.data(), c.size() * sizeof(float)), 0)
      << "differs from the documented order (padding past n included)";

  // Each of the k products and k + 1 sums rounds once (relative 2^-24), so the error is within
  // (k + 2) 2^-23 of sum |a||b| (+ |C0|); doubles make the reference's own error negligible.
  int64_t bad = 0;
  for (int64_t i = 0; i < cs.m; ++i)
    for (int64_t j = 0; j < cs.n; ++j) {
      double exact = cs.accumulate ? c0[i * ldc + j] : 0.0, magnitude = cs.accumulate ? std::fabs(exact) : 0.0;
      for (int64_t p = 0; p < cs.k; ++p) {
        exact += double(a.at(i, p)) * b.at(p, j);
        magnitude += std::fabs(double(a.at(i, p)) * b.at(p, j));
      }
      const double tolerance = double(cs.k + 2) * std::ldexp(magnitude, -23) + 1e-30;
      if (std::fabs(c[i * ldc + j] - exact) > tolerance && ++bad <= 3)
        ADD_FAILURE() << "C[" << i << "," << j << "] = " << c[i * ldc + j] << ", expected " << exact;
    }
  EXPECT_EQ(bad, 0);
}

struct Shape {
  int64_t m, n, k;
};

// Odd sizes around the tiles (6x16, 14x32), the k block (256), the streaming path (m <= 4)
// and the thread split; k = 1 and k past one block.
const Shape kShapes[] = {{1, 1, 1},       {1, 7, 33},     {7, 1, 33},     {7, 33, 1},     {2, 33, 255},
                         {3, 255, 600},   {4, 1023, 257}, {5, 129, 513},  {6, 16, 256},   {14, 32, 512},
                         {33, 255, 7},    {255, 33, 1023}, {1023, 255, 33}, {255, 1023, 255}, {1, 1023, 1023},
                         {33, 1023, 1023}, {1023, 1023, 1}, {64, 64, 257}};

TEST(Sgemm, RowMajor) {
  for (const Shape& s : kShapes) check({s.m, s.n, s.k, Layout::RowMajor, Layout::RowMajor, false, 0});
}

TEST(Sgemm, TransposedAccumulate) {
  for (const Shape& s : kShapes) check({s.m, s.n, s.k, Layout::Transposed, Layout::Transposed, true, 3});
}

TEST(Sgemm, StridedMixed) {
  for (const Shape& s : kShapes) {
    check({s.m, s.n, s.k, Layout::Strided, Layout::RowMajor, true, 0});
    check({s.m, s.n, s.k, Layout::RowMajor, Layout::Strided, false, 5});
  }
}

// Each compiled SIMD target this CPU runs (tiles of other sizes; no native fma below AVX2).
TEST(Sgemm, EverySimdTarget) {
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    ASSERT_STREQ(simdTarget(), hwy::TargetName(target));
    SCOPED_TRACE(hwy::TargetName(target));
    for (const Shape& s : {Shape{3, 37, 300}, Shape{17, 45, 300}, Shape{40, 70, 20}}) {
      check({s.m, s.n, s.k, Layout::RowMajor, Layout::RowMajor, false, 0});
      check({s.m, s.n, s.k, Layout::Transposed, Layout::Strided, true, 1});
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(Sgemm, EmptyK) {
  std::vector<float> c(6, 7.0f);
  sgemm(2, 3, 0, nullptr, 0, 1, nullptr, 3, 1, c.data(), 3, true);
  EXPECT_EQ(c, std::vector<float>(6, 7.0f));
  sgemm(2, 3, 0, nullptr, 0, 1, nullptr, 3, 1, c.data(), 3, false);
  EXPECT_EQ(c, std::vector<float>(6, 0.0f));
}

}  // namespace
}  // namespace gizml::cpu
