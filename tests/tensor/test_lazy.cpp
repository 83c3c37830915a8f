// A lazy chain evaluates in one pass: its only allocation is the result.
#include <gizml/tensor.h>
#include <gtest/gtest.h>

#include <cmath>

using namespace gizml;

TEST(Lazy, SpecStepOne) {
  const auto a = T::tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  const auto b = T::tensor({3, 2}, {1, 0, 0, 1, 1, 1});
  const auto c = a.matmul(b);
  EXPECT_EQ(c.text(), "[[4, 5], [10, 11]]");
  EXPECT_EQ(T::lazy(c).mul(T::lazy(T::scalar(0.5))).relu().eval().text(), "[[2, 2.5], [5, 5.5]]");
}

TEST(Lazy, ChainOfTenOpsAllocatesOnlyItsResult) {
  const int64_t n = 1 << 20;
  const auto x = T::uniform(T::Key(1), {n}, -2, 2);
  const auto y = T::uniform(T::Key(2), {1, n}, -2, 2).reshape({n});  // a view
  const auto bias = T::scalar(0.25);
  const auto chain = ((T::lazy(x) * 2.0 + T::lazy(y)).relu() - T::lazy(bias)).exp().mul(T::lazy(x)).abs().sqrt().add(1.0).tanh().neg();
  const uint64_t before = T::Storage::allocations();
  const auto out = chain.eval();
  EXPECT_EQ(T::Storage::allocations() - before, 1u) << "fused evaluation allocated an intermediate tensor";

  // The same values computed op by op (each step a tensor of its own).
  const auto two = T::scalar(2.0), one = T::scalar(1.0);
  const auto expected = x.mul(two).add(y).relu().sub(bias).exp().mul(x).abs().sqrt().add(one).tanh().neg();
  EXPECT_EQ(out.toFloats(), expected.toFloats());
}

TEST(Lazy, BroadcastingScalarsAndCasts) {
  const auto rows = T::tensor({3, 1}, {1, 2, 3});
  const auto cols = T::tensor({4}, {10, 20, 30, 40}, DType::I32);
  const auto r = (T::lazy(rows) + T::lazy(cols).cast(DType::F32)).mul(0.5).eval();
  EXPECT_EQ(r.shape(), (T::Shape{3, 4}));
  EXPECT_EQ(r.text(), "[[5.5, 10.5, 15.5, 20.5], [6, 11, 16, 21], [6.5, 11.5, 16.5, 21.5]]");
  // A weak integer scalar keeps an integer type; a fraction makes it F32.
  EXPECT_EQ((T::lazy(cols) * 2.0).dtype(), DType::I32);
  EXPECT_EQ((T::lazy(cols) * 0.5).dtype(), DType::F32);
  // Comparisons give Bool, where picks.
  const auto mask = T::lazy(cols).gt(T::lazy(T::scalar(25, DType::I32)));
  EXPECT_EQ(T::where(mask, T::lazy(cols), T::Lazy(0.0)).eval().text(), "[0, 0, 30, 40]");
}

TEST(Lazy, HalfPrecisionRoundsAfterEveryOp) {
  // In f16, 2048 + 1 rounds back to 2048 at once, so (x + 1) + 1 stays 2048 (as numpy float16).
  const auto x = T::tensor({1}, {2048}, DType::F16);
  EXPECT_EQ((T::lazy(x) + 1.0 + 1.0).eval().text(), "[2048]");
}

TEST(Lazy, NonContiguousOperandsAndOddSizes) {
  const auto m = T::arange(0, 7 * 1023).reshape({7, 1023});
  const auto t = m.transpose(0, 1);                                  // t[i][j] = j * 1023 + i
  const auto s = T::arange(0, 2046).slice(0, 0, 2046, 2).unsqueeze(1);  // s[i][0] = 2 i, stride 2
  const auto v = (T::lazy(t) * 2.0 + T::lazy(s)).eval().toFloats();
  for (int64_t i = 0; i < 1023; ++i)
    for (int64_t j = 0; j < 7; ++j)
      ASSERT_EQ(v[i * 7 + j], static_cast<float>(2 * (j * 1023 + i) + 2 * i)) << i << "," << j;
}
