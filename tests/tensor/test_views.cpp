// Views share storage and address the right elements; creation and printing follow the spec.
#include <gizml/tensor.h>
#include <gtest/gtest.h>

#include <cmath>

using namespace gizml;
using T::Shape;

namespace {
T::Tensor iota(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return T::arange(0, static_cast<double>(n)).reshape(shape);
}
}  // namespace

TEST(Views, ReshapeSharesStorage) {
  auto x = iota({2, 3, 4});
  auto y = x.reshape({6, -1});
  EXPECT_EQ(y.shape(), (Shape{6, 4}));
  EXPECT_EQ(y.storage(), x.storage());
  EXPECT_EQ(y.text(), x.contiguous().reshape({6, 4}).text());
}

TEST(Views, TransposeThenReshapeCopiesOnlyWhenNeeded) {
  auto x = iota({3, 4});
  auto t = x.transpose(0, 1);
  EXPECT_EQ(t.storage(), x.storage());
  EXPECT_FALSE(t.isContiguous());
  auto r = t.reshape({12});
  EXPECT_NE(r.storage(), x.storage());
  EXPECT_EQ(r.text(), "[0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]");
}

TEST(Views, AxesOfSizeOneKeepAViewContiguous) {
  // A reshape that adds an axis of size 1 gives it the view rule's stride, not the contiguous
  // one; no element is ever stepped to along it, so the view is still contiguous (as torch says).
  const auto x = iota({4, 6});
  for (const Shape& s : {Shape{1, 4, 6}, Shape{4, 1, 6}, Shape{4, 6, 1}, Shape{1, 24}}) {
    const auto v = x.reshape(s);
    EXPECT_EQ(v.storage(), x.storage());
    EXPECT_TRUE(v.isContiguous()) << tensor::shapeText(s);
  }
  EXPECT_FALSE(x.transpose(0, 1).reshape({6, 1, 4}).isContiguous());
  EXPECT_TRUE(iota({3, 0}).isContiguous());
}

TEST(Views, PermuteAndContiguous) {
  auto x = iota({2, 3, 4});
  auto p = x.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  auto c = p.contiguous();
  EXPECT_TRUE(c.isContiguous());
  // p[3][1][2] = x[1][2][3] = 1*12 + 2*4 + 3
  EXPECT_EQ(c.toInts()[3 * 6 + 1 * 3 + 2], 23);
}

TEST(Views, SliceWithSteps) {
  auto x = iota({10});
  EXPECT_EQ(x.slice(0, 1, 8, 3).text(), "[1, 4, 7]");
  EXPECT_EQ(x.slice(0, -1, -11, -2).text(), "[9, 7, 5, 3, 1]");
  EXPECT_EQ(x.slice(0, 8, 100).text(), "[8, 9]");
  EXPECT_EQ(x.slice(0, 5, 2).numel(), 0);
  auto m = iota({4, 5}).slice(1, 1, 5, 2).slice(0, 3, 0, -2);
  EXPECT_EQ(m.text(), "[[16, 18], [6, 8]]");
  EXPECT_EQ(m.storage(), m.storage());
}

TEST(Views, ExpandSqueezeUnsqueeze) {
  auto x = T::tensor({3}, {1, 2, 3});
  auto e = x.unsqueeze(0).expand({2, 3});
  EXPECT_EQ(e.strides(), (Shape{0, 1}));
  EXPECT_EQ(e.text(), "[[1, 2, 3], [1, 2, 3]]");
  auto u = x.unsqueeze(1);
  EXPECT_EQ(u.shape(), (Shape{3, 1}));
  EXPECT_EQ(u.squeeze(1).shape(), (Shape{3}));
  EXPECT_EQ(T::zeros({1, 3, 1}).squeeze().shape(), (Shape{3}));
}

// assign into a view of a tensor from another view of it: the values the source held before, as
// numpy's a[1:4] = a[0:3] gives ([0, 0, 1, 2, 4, 5] for a = arange(6)), for a same-dtype copy
// (one memmove) and for a cast (the lazy path, into a destination that does not overlap).
TEST(Views, AssignFromAnOverlappingViewCopiesTheSourceFirst) {
  for (const DType dtype : {DType::U8, DType::F32, DType::I64}) {
    const T::Tensor a = iota({6}).cast(dtype);
    T::assign(a.slice(0, 1, 4), a.slice(0, 0, 3));
    EXPECT_EQ(a.cast(DType::F32).toFloats(), (std::vector<float>{0, 0, 1, 2, 4, 5})) << dtypeName(dtype);
  }
  const T::Tensor codes = iota({2, 4}).cast(DType::U8), into = T::zeros({2, 4}, DType::F32);
  T::assign(into, codes);
  EXPECT_EQ(into.toFloats(), iota({2, 4}).toFloats());
}

TEST(Creation, Constants) {
  EXPECT_EQ(T::full({2, 2}, 1.5).text(), "[[1.5, 1.5], [1.5, 1.5]]");
  EXPECT_EQ(T::ones({3}, DType::I32).text(), "[1, 1, 1]");
  EXPECT_EQ(T::zeros({2}, DType::Bool).text(), "[false, false]");
  EXPECT_EQ(T::scalar(0.1).text(), "0.1");
  EXPECT_EQ(T::arange(0, 1, 0.25).text(), "[0, 0.25, 0.5, 0.75]");
  EXPECT_EQ(T::linspace(0, 1, 5).text(), "[0, 0.25, 0.5, 0.75, 1]");
  EXPECT_EQ(T::arange(5, 0, -2, DType::I64).text(), "[5, 3, 1]");
}

TEST(Printing, ShortestRoundTrip) {
  EXPECT_EQ(T::tensor({3}, {0.1, 1e-7, 1e20}).text(), "[0.1, 1e-07, 1e+20]");
  EXPECT_EQ(T::tensor({2}, {0.1, 3.14159}, DType::F16).text(), "[0.1, 3.14]");
  EXPECT_EQ(T::tensor({1}, {0.1}, DType::BF16).text(), "[0.1]");
  EXPECT_EQ(T::tensor({3}, {-1, 0, 1}, DType::I8).text(), "[-1, 0, 1]");
  EXPECT_EQ(T::tensor({2, 0}, {}).text(), "[[], []]");
  EXPECT_EQ(T::full({2}, NAN).add(T::tensor({2}, {0, 0})).text(), "[nan, nan]");
}

TEST(Random, CounterBasedAndDeterministic) {
  const T::Key key(42);
  auto a = T::uniform(key, {1000});
  auto b = T::uniform(key, {1000});
  EXPECT_EQ(a.toFloats(), b.toFloats());
  // Element i depends only on its counter: a prefix of a longer draw is the shorter draw.
  auto longer = T::uniform(key, {4000});
  EXPECT_EQ(longer.slice(0, 0, 1000).toFloats(), a.toFloats());
  auto other = T::uniform(key.split(1), {1000});
  EXPECT_NE(other.toFloats(), a.toFloats());
  for (float v : a.toFloats()) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LT(v, 1.0f);
  }
  // Moments of 200k normals: mean 0 and variance 1 within a few standard errors.
  auto n = T::normal(key, {200000});
  EXPECT_NEAR(n.mean().item(), 0.0, 0.01);
  EXPECT_NEAR(n.variance().item(), 1.0, 0.02);
  EXPECT_NEAR(a.mean().item(), 0.5, 0.03);
}

TEST(Casts, RoundToNearestEven) {
  // 1 + 2^-11 is halfway between two f16 values: ties go to the even one (1.0).
  auto h = T::tensor({3}, {1.0 + std::ldexp(1.0, -11), 1.0 + 3 * std::ldexp(1.0, -11), 65520.0}).cast(DType::F16);
  EXPECT_EQ(h.toFloats(), (std::vector<float>{1.0f, 1.0f + 2 * std::ldexp(1.0f, -10), INFINITY}));
  auto b = T::tensor({2}, {1.0 + std::ldexp(1.0, -8), 1.0 + 3 * std::ldexp(1.0, -8)}).cast(DType::BF16);
  EXPECT_EQ(b.toFloats(), (std::vector<float>{1.0f, 1.0f + std::ldexp(1.0f, -6)}));
  auto i = T::tensor({4}, {-3.7, 300.0, NAN, 2.9}).cast(DType::I8);
  EXPECT_EQ(i.toInts(), (std::vector<int64_t>{-3, 127, 0, 2}));
  EXPECT_EQ(T::tensor({2}, {300, -1}, DType::I32).cast(DType::U8).toInts(), (std::vector<int64_t>{44, 255}));
}

TEST(Casts, DoublesRoundOnceToHalfTypes) {
  // 1 + 2^-8 + 2^-30 is just above a BF16 tie: rounding through f32 first (to 1 + 2^-8, a tie)
  // would give 1.0; rounding once gives 1 + 2^-7.
  const double x = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  EXPECT_EQ(T::tensor({1}, {x}, DType::BF16).toFloats()[0], 1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(T::full({1}, x, DType::BF16).toFloats()[0], 1.0f + std::ldexp(1.0f, -7));
  const double h = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(T::tensor({1}, {h}, DType::F16).toFloats()[0], 1.0f + std::ldexp(1.0f, -10));
  const auto zero = T::zeros({1}, DType::F16);
  EXPECT_EQ((T::lazy(zero) + h).eval().toFloats()[0], 1.0f + std::ldexp(1.0f, -10));
}
