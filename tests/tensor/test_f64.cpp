// DType::F64: creation, printing, casts, promotion, and elementwise chains, reductions and
// matmul computed in double (each compared with a double computation here, and shown to differ
// from what f32 would give); operations without an f64 path reject it.
#include <gizml/netops.h>
#include <gizml/tensor.h>
#include <gizml/tile.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/expect_error.h"

using namespace gizml;

namespace {

// n doubles that use all 53 bits of their significands.
std::vector<double> values(size_t n, double scale = 1.0, double phase = 0.0) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.7 * static_cast<double>(i) + phase);
  return v;
}

// docs/tensor.md's order of a sum: chunks of 4096, 16 lanes each combined pairwise, chunks in order.
double documentedSum(const std::vector<double>& x) {
  double total = 0;
  for (size_t start = 0; start < x.size(); start += 4096) {
    double lanes[16] = {};
    for (size_t i = start; i < std::min(x.size(), start + 4096); ++i) lanes[(i - start) % 16] += x[i];
    for (int width = 8; width >= 1; width /= 2)
      for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
    total = start == 0 ? lanes[0] : total + lanes[0];
  }
  return total;
}

}  // namespace

TEST(F64, TheDType) {
  EXPECT_EQ(dtypeSize(DType::F64), 8u);
  EXPECT_STREQ(dtypeName(DType::F64), "f64");
  EXPECT_TRUE(isFloat(DType::F64));
  EXPECT_FALSE(isInteger(DType::F64));
}

TEST(F64, PromotionWinsOverEveryOtherType) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::U8, DType::I32, DType::I64, DType::Bool,
                  DType::F64}) {
    EXPECT_EQ(promoteTypes(DType::F64, t), DType::F64) << dtypeName(t);
    EXPECT_EQ(promoteTypes(t, DType::F64), DType::F64) << dtypeName(t);
  }
  const auto d = T::tensor({2}, {1, 2}, DType::F64);
  EXPECT_EQ(d.add(T::tensor({2}, {1, 2})).dtype(), DType::F64);
  EXPECT_EQ(T::tensor({2}, {1, 2}, DType::I64).mul(d).dtype(), DType::F64);
  EXPECT_EQ(T::tensor({2}, {1, 0}, DType::Bool).sub(d).dtype(), DType::F64);
  EXPECT_EQ(d.gt(T::tensor({2}, {1, 1}, DType::BF16)).dtype(), DType::Bool);
  // A weak scalar takes the F64 dtype with its full double value.
  EXPECT_EQ((T::lazy(d) + 0.1).eval().toDoubles(), (std::vector<double>{1.1, 2.1}));
  EXPECT_EQ(d.sum().dtype(), DType::F64);
  EXPECT_EQ(d.mean().dtype(), DType::F64);
  EXPECT_EQ(d.softmax().dtype(), DType::F64);
  EXPECT_EQ(d.reshape({1, 2}).matmul(T::tensor({2, 1}, {1, 1})).dtype(), DType::F64);
}

TEST(F64, CreationAndPrinting) {
  const auto x = T::tensor({2, 3}, {0.1, 1.0 / 3.0, -2.5, 1e300, 4, 1e-7}, DType::F64);
  EXPECT_EQ(x.dtype(), DType::F64);
  EXPECT_EQ(x.text(), "[[0.1, 0.3333333333333333, -2.5], [1e+300, 4, 1e-07]]");
  EXPECT_EQ(x.toDoubles(), (std::vector<double>{0.1, 1.0 / 3.0, -2.5, 1e300, 4, 1e-7}));
  EXPECT_EQ(T::scalar(0.1, DType::F64).item(), 0.1);
  EXPECT_EQ(T::scalar(0.1, DType::F64).text(), "0.1");
  EXPECT_EQ(T::tensor({3}, {INFINITY, -INFINITY, NAN}, DType::F64).text(), "[inf, -inf, nan]");
  EXPECT_EQ(T::zeros({2}, DType::F64).text(), "[0, 0]");
  EXPECT_EQ(T::ones({2}, DType::F64).text(), "[1, 1]");
  EXPECT_EQ(T::full({2}, 0.1, DType::F64).toDoubles(), (std::vector<double>{0.1, 0.1}));
  EXPECT_EQ(T::arange(0, 3, 1, DType::F64).text(), "[0, 1, 2]");
  // The F32 of 0.1 prints as 0.1 in f32 and as its exact double in f64.
  EXPECT_EQ(T::scalar(0.1).cast(DType::F64).text(), "0.10000000149011612");
  // Random draws: the same 24 bits as F32's, the affine map in double.
  const auto u = T::uniform(T::Key(3), {100}, 0.0, 1.0, DType::F64);
  EXPECT_EQ(u.dtype(), DType::F64);
  EXPECT_EQ(u.toDoubles(), T::uniform(T::Key(3), {100}, 0.0, 1.0).toDoubles());
  const auto n = T::normal(T::Key(3), {1000}, 0.0, 1.0, DType::F64);
  EXPECT_NEAR(n.mean().item(), 0.0, 0.1);
}

TEST(F64, CastsToAndFromEveryDType) {
  const auto x = T::tensor({6}, {0.1, -2.9, 2.9, 300.5, 1e20, NAN}, DType::F64);
  EXPECT_EQ(x.cast(DType::F32).toFloats()[0], 0.1f);
  EXPECT_EQ(x.cast(DType::F32).text(), "[0.1, -2.9, 2.9, 300.5, 1e+20, nan]");
  EXPECT_EQ(x.cast(DType::I32).toInts(), (std::vector<int64_t>{0, -2, 2, 300, 2147483647, 0}));
  EXPECT_EQ(x.cast(DType::I8).toInts(), (std::vector<int64_t>{0, -2, 2, 127, 127, 0}));
  EXPECT_EQ(x.cast(DType::U8).toInts(), (std::vector<int64_t>{0, 0, 2, 255, 255, 0}));
  EXPECT_EQ(x.cast(DType::I64).toInts()[4], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(x.cast(DType::Bool).text(), "[true, true, true, true, true, true]");
  // F16 and BF16 round once from the double: 1 + 2^-11 + 2^-40 is above the half-way point of
  // f16 (rounding through f32 first would lose 2^-40 and tie to 1).
  const double above = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(T::scalar(above, DType::F64).cast(DType::F16).item(), 1.0 + std::ldexp(1.0, -10));
  const double aboveBf16 = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  EXPECT_EQ(T::scalar(aboveBf16, DType::F64).cast(DType::BF16).item(), 1.0 + std::ldexp(1.0, -7));
  // Integers to f64: exact up to 2^53, then to nearest even.
  const auto ints = T::tensor({3}, {9007199254740992.0, 9007199254740992.0, -7}, DType::I64)
                        .add(T::tensor({3}, {1, 3, 0}, DType::I64));  // 2^53 + 1, 2^53 + 3, -7
  EXPECT_EQ(ints.cast(DType::F64).toDoubles(), (std::vector<double>{9007199254740992.0, 9007199254740996.0, -7}));
  // Every dtype to F64 and back.
  const auto small = T::tensor({4}, {0, 1, -3, 100}, DType::F64);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::I32, DType::I64}) {
    EXPECT_EQ(small.cast(t).cast(DType::F64).toDoubles(), small.toDoubles()) << dtypeName(t);
    EXPECT_EQ(small.cast(t).cast(DType::F64).dtype(), DType::F64);
  }
  EXPECT_EQ(T::tensor({2}, {1, 0}, DType::Bool).cast(DType::F64).text(), "[1, 0]");
  EXPECT_EQ(T::tensor({2}, {7, 250}, DType::U8).cast(DType::F64).text(), "[7, 250]");
}

TEST(F64, ViewsCopiesAndJoins) {
  const auto x = T::tensor({2, 3}, values(6), DType::F64);
  const std::vector<double> v = values(6);
  EXPECT_EQ(x.transpose(0, 1).contiguous().toDoubles(), (std::vector<double>{v[0], v[3], v[1], v[4], v[2], v[5]}));
  EXPECT_EQ(x.slice(1, 2, -4, -2).toDoubles(), (std::vector<double>{v[2], v[0], v[5], v[3]}));
  EXPECT_EQ(x.slice(0, 1, 2).expand({3, 3}).toDoubles()[7], v[4]);
  const auto joined = T::concat({x, T::tensor({2, 1}, {0.5, 0.25})}, 1);
  EXPECT_EQ(joined.dtype(), DType::F64);
  EXPECT_EQ(joined.toDoubles(), (std::vector<double>{v[0], v[1], v[2], 0.5, v[3], v[4], v[5], 0.25}));
  EXPECT_EQ(x.indexSelect(1, T::tensor({2}, {2, 0}, DType::I64)).toDoubles(),
            (std::vector<double>{v[2], v[0], v[5], v[3]}));
  const auto target = T::zeros({3, 2}, DType::F64);
  T::assign(target.transpose(0, 1), x);  // a strided destination
  EXPECT_EQ(target.toDoubles(), x.transpose(0, 1).contiguous().toDoubles());
}

TEST(F64, ElementwiseChainComputesInDouble) {
  const std::vector<double> v = values(3000, 2.0), ww = values(6000, 1.5, 0.4);
  std::vector<double> w;
  for (size_t i = 0; i < 6000; i += 2) w.push_back(ww[i]);
  // y is a strided view (every other element).
  const auto x = T::tensor({3000}, v, DType::F64), y = T::tensor({3000, 2}, ww, DType::F64).slice(1, 0, 1).squeeze(1);
  ASSERT_FALSE(y.isContiguous());
  // A fused chain of f64 steps, a strided operand, a scalar, and transcendental functions.
  const auto out = ((T::lazy(x) * 3.0 + 0.1) / T::lazy(y).abs().add(T::Lazy(0.5)) - T::lazy(x).exp().sqrt())
                       .tanh()
                       .eval();
  ASSERT_EQ(out.dtype(), DType::F64);
  const std::vector<double> got = out.toDoubles();
  const auto f32 = ((T::lazy(x.cast(DType::F32)) * 3.0 + 0.1) / T::lazy(y.cast(DType::F32)).abs().add(T::Lazy(0.5)) -
                    T::lazy(x.cast(DType::F32)).exp().sqrt())
                       .tanh()
                       .eval()
                       .toDoubles();
  double farFromF32 = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double expected = std::tanh((v[i] * 3.0 + 0.1) / (std::fabs(w[i]) + 0.5) - std::sqrt(std::exp(v[i])));
    ASSERT_EQ(got[i], expected) << i;
    farFromF32 = std::max(farFromF32, std::fabs(got[i] - f32[i]));
  }
  EXPECT_GT(farFromF32, 1e-8);  // f32 would be off by far more than f64's rounding
  // 0.1 + 0.2 != 0.3 in f64 (in f32 they are equal).
  const auto sum = T::scalar(0.1, DType::F64).add(T::scalar(0.2, DType::F64));
  EXPECT_EQ(sum.eq(T::scalar(0.3, DType::F64)).text(), "false");
  EXPECT_EQ(sum.cast(DType::F32).eq(T::scalar(0.3)).text(), "true");
  EXPECT_EQ(sum.text(), "0.30000000000000004");
}

TEST(F64, EveryElementwiseOperation) {
  const std::vector<double> v = {-2.5, -1.25, -0.5, 0.0, 0.3, 0.5, 1.5, 2.5, NAN};
  const auto x = T::tensor({9}, v, DType::F64);
  auto expectUnary = [&](T::UnaryOp op, double (*f)(double)) {
    const auto y = T::unary(op, x);
    ASSERT_EQ(y.dtype(), DType::F64) << T::opName(op);
    const std::vector<double> got = y.toDoubles();
    for (size_t i = 0; i < v.size(); ++i) {
      const double e = f(v[i]);
      if (std::isnan(e)) EXPECT_TRUE(std::isnan(got[i])) << T::opName(op) << " " << v[i];
      else EXPECT_EQ(got[i], e) << T::opName(op) << " " << v[i];
    }
  };
  expectUnary(T::UnaryOp::Neg, [](double a) { return -a; });
  expectUnary(T::UnaryOp::Abs, [](double a) { return std::fabs(a); });
  expectUnary(T::UnaryOp::Exp, [](double a) { return std::exp(a); });
  expectUnary(T::UnaryOp::Log, [](double a) { return std::log(a); });
  expectUnary(T::UnaryOp::Sqrt, [](double a) { return std::sqrt(a); });
  expectUnary(T::UnaryOp::Rsqrt, [](double a) { return 1.0 / std::sqrt(a); });
  expectUnary(T::UnaryOp::Sin, [](double a) { return std::sin(a); });
  expectUnary(T::UnaryOp::Cos, [](double a) { return std::cos(a); });
  expectUnary(T::UnaryOp::Tanh, [](double a) { return std::tanh(a); });
  expectUnary(T::UnaryOp::Sigmoid, [](double a) { return 1.0 / (1.0 + std::exp(-a)); });
  expectUnary(T::UnaryOp::Relu, [](double a) { return a < 0 ? 0.0 : a; });
  expectUnary(T::UnaryOp::Silu, [](double a) { return a / (1.0 + std::exp(-a)); });
  expectUnary(T::UnaryOp::GeluErf, [](double a) { return 0.5 * a * std::erfc(a * -0.70710678118654752); });
  expectUnary(T::UnaryOp::Floor, [](double a) { return std::floor(a); });
  expectUnary(T::UnaryOp::Ceil, [](double a) { return std::ceil(a); });
  expectUnary(T::UnaryOp::Round, [](double a) { return std::nearbyint(a); });  // half to even
  expectUnary(T::UnaryOp::Sign, [](double a) { return a > 0 ? 1.0 : a < 0 ? -1.0 : a == 0 ? 0.0 : a; });
  EXPECT_EQ(x.round().slice(0, 0, 3).text(), "[-2, -1, -0]");
  EXPECT_NEAR(x.geluTanh().toDoubles()[6], 1.3995715769802328, 1e-15);

  const auto a = T::tensor({4}, {7.5, -7.5, 2.0, NAN}, DType::F64), b = T::tensor({4}, {2.0, 2.0, -0.5, 1.0}, DType::F64);
  EXPECT_EQ(a.mod(b).slice(0, 0, 3).text(), "[1.5, 0.5, -0]");
  EXPECT_EQ(a.pow(b).slice(0, 0, 3).text(), "[56.25, 56.25, 0.7071067811865476]");
  EXPECT_EQ(a.min(b).text(), "[2, -7.5, -0.5, nan]");
  EXPECT_EQ(a.max(b).text(), "[7.5, 2, 2, nan]");
  EXPECT_EQ(a.gt(b).text(), "[true, false, true, false]");
  EXPECT_EQ(a.ne(b).text(), "[true, true, true, true]");
  EXPECT_EQ(T::where(a.lt(b), a, T::scalar(0.1, DType::F64)).toDoubles()[1], -7.5);
  EXPECT_EQ(T::where(a.lt(b), a, T::scalar(0.1, DType::F64)).toDoubles()[0], 0.1);
  // Integer division stays F32; a fraction of an F64 stays F64.
  EXPECT_EQ(T::tensor({1}, {1}, DType::I32).div(T::tensor({1}, {3}, DType::I32)).dtype(), DType::F32);
  EXPECT_EQ(T::tensor({1}, {1}, DType::F64).div(T::tensor({1}, {3}, DType::I32)).item(), 1.0 / 3.0);
}

TEST(F64, ReductionsInTheDocumentedOrder) {
  const std::vector<double> v = values(2 * 5000, 1.0);  // two rows of 5000 (two chunks each)
  const auto x = T::tensor({2, 5000}, v, DType::F64);
  const std::vector<double> row0(v.begin(), v.begin() + 5000), row1(v.begin() + 5000, v.end());
  const auto sums = x.sum({1});
  ASSERT_EQ(sums.dtype(), DType::F64);
  EXPECT_EQ(sums.toDoubles(), (std::vector<double>{documentedSum(row0), documentedSum(row1)}));
  EXPECT_EQ(x.mean({1}).toDoubles()[1], documentedSum(row1) / 5000.0);
  // Summing the f32 roundings gives another value: the f64 sum did not go through f32.
  EXPECT_NE(x.sum({1}).toDoubles()[0], x.cast(DType::F32).sum({1}).toDoubles()[0]);
  EXPECT_GT(std::fabs(x.sum().item() - x.cast(DType::F32).sum().item()), 1e-9);
  // A transposed view reduces the same values.
  EXPECT_EQ(x.transpose(0, 1).sum({0}).toDoubles(), sums.toDoubles());
  double hi = -INFINITY, lo = INFINITY;
  for (double d : row0) hi = std::max(hi, d), lo = std::min(lo, d);
  EXPECT_EQ(x.max({1}).toDoubles()[0], hi);
  EXPECT_EQ(x.min({1}).toDoubles()[0], lo);
  EXPECT_EQ(x.argmax(1).toInts()[0], std::max_element(row0.begin(), row0.end()) - row0.begin());
  EXPECT_TRUE(std::isnan(T::tensor({3}, {1, NAN, 2}, DType::F64).max().item()));
  // variance: the mean, then the sum of squared differences in the same order.
  std::vector<double> squares;
  const double m = documentedSum(row0) / 5000.0;
  for (double d : row0) squares.push_back((d - m) * (d - m));
  EXPECT_EQ(x.variance({1}).toDoubles()[0], documentedSum(squares) / 5000.0);
  // cumsum: a running f64 sum.
  const auto c = T::tensor({3}, {0.1, 0.2, 0.3}, DType::F64).cumsum(0);
  EXPECT_EQ(c.toDoubles(), (std::vector<double>{0.1, 0.1 + 0.2, 0.1 + 0.2 + 0.3}));
  // softmax and logSoftmax in double.
  const std::vector<double> r = {0.5, -1.25, 2.0};
  const double mx = 2.0, s = documentedSum({std::exp(0.5 - mx), std::exp(-1.25 - mx), std::exp(0.0)});
  const auto sm = T::tensor({3}, r, DType::F64).softmax();
  const auto lsm = T::tensor({3}, r, DType::F64).logSoftmax();
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(sm.toDoubles()[i], std::exp(r[i] - mx) / s);
    EXPECT_EQ(lsm.toDoubles()[i], (r[i] - mx) - std::log(s));
  }
}

TEST(F64, MatmulSumsInDouble) {
  const int64_t m = 5, k = 300, n = 7;
  const std::vector<double> av = values(static_cast<size_t>(m * k), 1.0), bv = values(static_cast<size_t>(k * n), 1.0, 0.9);
  const auto a = T::tensor({m, k}, av, DType::F64), b = T::tensor({k, n}, bv, DType::F64);
  // b given as a transposed view of its transpose: read in place.
  const auto bt = b.transpose(0, 1).contiguous().transpose(0, 1);
  const auto c = a.matmul(bt);
  ASSERT_EQ(c.dtype(), DType::F64);
  const std::vector<double> got = c.toDoubles();
  const std::vector<double> f32 = a.cast(DType::F32).matmul(b.cast(DType::F32)).toDoubles();
  double farFromF32 = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double e = 0;
      for (int64_t p = 0; p < k; ++p) e += av[i * k + p] * bv[p * n + j];  // increasing k, no fma
      EXPECT_EQ(got[i * n + j], e) << i << ", " << j;
      farFromF32 = std::max(farFromF32, std::fabs(got[i * n + j] - f32[i * n + j]));
    }
  EXPECT_GT(farFromF32, 1e-8);
  // Batched with a broadcast batch axis, and a mixed F32 operand promoted to F64.
  const auto batch = T::stack({a, a.mul(T::scalar(2.0, DType::F64))}, 0);
  const auto cb = batch.matmul(b.cast(DType::F32));
  ASSERT_EQ(cb.dtype(), DType::F64);
  EXPECT_EQ(cb.slice(0, 0, 1).reshape({m, n}).toDoubles(), a.matmul(b.cast(DType::F32).cast(DType::F64)).toDoubles());
}

TEST(F64, NetopsForGradientsComputeInDouble) {
  const auto x = T::tensor({2, 3}, {0.1, 0.2, 0.7, -1.0, 0.5, 2.0}, DType::F64);
  const auto w = T::tensor({3}, {1.0, 0.5, 2.0}, DType::F64), b = T::tensor({3}, {0.0, 0.1, -0.1}, DType::F64);
  const std::vector<T::Tensor> ln = netops::layerNorm(x, w, b, 1e-5);
  ASSERT_EQ(ln[0].dtype(), DType::F64);
  const double mu = (0.1 + 0.2 + 0.7) / 3.0;
  const double var = ((0.1 - mu) * (0.1 - mu) + (0.2 - mu) * (0.2 - mu) + (0.7 - mu) * (0.7 - mu)) / 3.0;
  EXPECT_EQ(ln[0].toDoubles()[2], (0.7 - mu) * (1.0 / std::sqrt(var + 1e-5)) * 2.0 - 0.1);
  EXPECT_EQ(netops::layerNormGrad(x, x, w, ln[1], ln[2])[0].dtype(), DType::F64);
  const double loss = netops::crossEntropyLoss(x, {2, 0});
  const double row0 = 0.7 + std::log(std::exp(0.1 - 0.7) + std::exp(0.2 - 0.7) + 1.0) - 0.7;
  const double row1 = 2.0 + std::log(std::exp(-3.0) + std::exp(-1.5) + 1.0) + 1.0;
  EXPECT_NEAR(loss, (row0 + row1) / 2, 1e-15);
  EXPECT_EQ(netops::crossEntropyGrad(x, {2, 0}, 1.0).dtype(), DType::F64);
  const auto dropped = netops::dropout(x, T::Key(4), 0.5);
  ASSERT_EQ(dropped.dtype(), DType::F64);
  const auto mask = netops::dropout(T::ones({2, 3}), T::Key(4), 0.5).toDoubles();
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(dropped.toDoubles()[i], mask[i] == 0 ? 0.0 : x.toDoubles()[i] * 2.0);
}

TEST(F64, OperationsWithoutAnF64PathRejectIt) {
  const auto x = T::ones({1, 1, 4, 4}, DType::F64);
  expectError([&] { netops::pool2d(x, 2, 2, false); }, {"netops::pool2d", "f64"});
  expectError([&] { netops::im2col(x, 2, 2, 1, 0); }, {"netops::im2col", "f64"});
  const auto m = T::ones({2, 3}, DType::F64);
  expectError([&] { netops::affine(m, T::ones({4, 3}), T::ones({4})); }, {"netops::affine", "f64"});
  expectError([&] { netops::affine(T::ones({2, 3}), T::ones({4, 3}), T::ones({4}), DType::F64); },
              {"netops::affine", "f64"});
  expectError([&] { netops::groupNorm(T::ones({2, 3}), 1, T::ones({2}), T::ones({2}), 1e-5, false, DType::F64); },
              {"netops::groupNorm", "f64"});
  expectError([&] { netops::argmax(m); }, {"netops::argmax", "f64"});
  // Tile programs hold no f64: reading, writing or making an F64 tile fails while tracing.
  expectError([&] { Tile::run({1}, [&](Tile::Program& p) { p.read(m, {2, 3}); }); }, {"tile read", "f64"});
  expectError([&] { Tile::run({1}, [&](Tile::Program& p) { p.write(m, {2, 3}); }); }, {"tile write", "f64"});
  expectError([&] {
    Tile::run({1}, [&](Tile::Program& p) { p.write(T::zeros({2, 3}), {2, 3}).put(p.zeros({2, 3}).cast(DType::F64), {0, 0}); });
  }, {"tile cast", "f64"});
}
