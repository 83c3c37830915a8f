// Fused chains (runs of f32 operations kept in registers) give the same bits as running the
// per-operation kernels one after another over whole arrays (NaN for NaN), for every operation a chain
// takes, every operand form, odd sizes, special values and streamed large results.
#include <gizml/tensor.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "cpu/elementwise.h"

using namespace gizml;
using T::BinaryOp;
using T::UnaryOp;

namespace {

// One link of a test chain.
struct Link {
  enum Form { Unary, Tensor, TensorFirst, Scalar, ScalarFirst, Self } form;
  int op;
  double scalar = 0;
};

// Values with the special cases scattered through them (the first ones land in every block's
// first vector, the last ones in the partial vector at the end).
std::vector<float> inputValues(int64_t n, uint64_t seed, float low, float high) {
  std::vector<float> v = T::uniform(T::Key(seed), {n}, low, high).toFloats();
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY,
                            1e-40f, -1e-40f, 50000.0f, -3.5f, 2.5f};
  for (size_t k = 0; k < std::size(specials) && static_cast<int64_t>(k) < n; ++k) {
    v[k] = specials[k];
    v[static_cast<size_t>(n) - 1 - k] = specials[std::size(specials) - 1 - k];
  }
  return v;
}

T::Lazy apply(const T::Lazy& v, const Link& l, const T::Lazy& y) {
  const auto b = static_cast<BinaryOp>(l.op);
  switch (l.form) {
    case Link::Unary: return v.unary(static_cast<UnaryOp>(l.op));
    case Link::Tensor: return v.binary(b, y);
    case Link::TensorFirst: return y.binary(b, v);
    case Link::Scalar: return v.binary(b, T::Lazy(l.scalar));
    case Link::ScalarFirst: return T::Lazy(l.scalar).binary(b, v);
    case Link::Self: return v.binary(b, v);
  }
  return v;
}

// The chain through the per-operation kernels, each over the whole array.
std::vector<float> opByOp(std::vector<float> v, const std::vector<Link>& links, const std::vector<float>& y) {
  std::vector<float> out(v.size());
  const auto n = static_cast<int64_t>(v.size());
  for (const Link& l : links) {
    const auto b = static_cast<BinaryOp>(l.op);
    const auto s = static_cast<float>(l.scalar);
    switch (l.form) {
      case Link::Unary: cpu::unaryF32(static_cast<UnaryOp>(l.op), v.data(), out.data(), n); break;
      case Link::Tensor: cpu::binaryF32(b, v.data(), y.data(), out.data(), n); break;
      case Link::TensorFirst: cpu::binaryF32(b, y.data(), v.data(), out.data(), n); break;
      case Link::Scalar: cpu::binaryScalarF32(b, v.data(), s, out.data(), n, false); break;
      case Link::ScalarFirst: cpu::binaryScalarF32(b, v.data(), s, out.data(), n, true); break;
      case Link::Self: cpu::binaryF32(b, v.data(), v.data(), out.data(), n); break;
    }
    std::swap(v, out);
  }
  return v;
}

// Bits equal, but any NaN for a NaN: which operand's NaN an addition passes on (and so its
// sign) depends on the operand order the compiler picks for a commutative operation.
void expectSameBits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    ASSERT_EQ(a, b) << what << ": element " << i << " of " << got.size() << " is " << got[i] << ", op by op "
                    << want[i];
  }
}

void checkChain(const std::vector<Link>& links, int64_t n, float low = -4, float high = 4) {
  const std::vector<float> xv = inputValues(n, 11, low, high), yv = inputValues(n, 12, -2, 2);
  const auto x = T::tensor({n}, std::vector<double>(xv.begin(), xv.end()));
  const auto y = T::tensor({n}, std::vector<double>(yv.begin(), yv.end()));
  T::Lazy chain = T::lazy(x);
  std::string what = "n=" + std::to_string(n);
  for (const Link& l : links) {
    chain = apply(chain, l, T::lazy(y));
    what += std::string(" ") + (l.form == Link::Unary ? T::opName(static_cast<UnaryOp>(l.op))
                                                      : T::opName(static_cast<BinaryOp>(l.op))) +
            "/" + std::to_string(l.form) + "/" + std::to_string(l.scalar);
  }
  expectSameBits(chain.eval().toFloats(), opByOp(xv, links, yv), what);
}

const int64_t kSizes[] = {1, 7, 33, 1023, 2053};

}  // namespace

TEST(LazyChains, EveryUnaryOperation) {
  for (int op = 0; op <= static_cast<int>(UnaryOp::Sign); ++op) {
    if (op == static_cast<int>(UnaryOp::GeluErf)) continue;  // not vectorised: computed on its own
    for (int64_t n : kSizes)
      checkChain({{Link::Scalar, static_cast<int>(BinaryOp::Mul), 3.0}, {Link::Unary, op},
                  {Link::Tensor, static_cast<int>(BinaryOp::Add)}}, n);
  }
}

TEST(LazyChains, EveryBinaryOperationAndForm) {
  const BinaryOp ops[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Min, BinaryOp::Max};
  const double constants[] = {0.5, -0.0, 0.0, std::nan("")};  // NaN: min/max take their general path
  for (BinaryOp b : ops)
    for (int form = Link::Tensor; form <= Link::Self; ++form)
      for (double c : constants)
        for (int64_t n : kSizes)
          checkChain({{static_cast<Link::Form>(form), static_cast<int>(b), c},
                      {Link::Unary, static_cast<int>(UnaryOp::Abs)},
                      {static_cast<Link::Form>(form), static_cast<int>(b), c}}, n);
}

TEST(LazyChains, PartialVectorLanesStayZeroBetweenLinks) {
  // exp(x) * 1e5 stays below 39000 for x < -1 but is 1e5 for a zero lane: were the unused lanes
  // of the last vector not zero before sin, that vector would take sin's slow path.
  const int op = static_cast<int>(BinaryOp::Mul);
  for (int64_t n : {1, 1027, 2049})
    checkChain({{Link::Unary, static_cast<int>(UnaryOp::Exp)}, {Link::Scalar, op, 1e5},
                {Link::Unary, static_cast<int>(UnaryOp::Sin)}}, n, -3, -1);
}

TEST(LazyChains, MultiplyThenAddRoundTwiceAndLongRunsSplit) {
  // A multiplication feeding an addition is two roundings, never one fused multiply-add; a run
  // longer than one chain may hold (kMaxChainLinks) continues in the next chain.
  std::vector<Link> links;
  for (int k = 0; k < 75; ++k) {
    links.push_back({Link::Scalar, static_cast<int>(BinaryOp::Mul), 1.0 + 1.0 / 3.0});
    links.push_back({Link::Tensor, static_cast<int>(BinaryOp::Add)});
    links.push_back({Link::Scalar, static_cast<int>(BinaryOp::Mul), 0.7});
  }
  for (int64_t n : {33, 2053}) checkChain(links, n);
}

TEST(LazyChains, SharedValuesOperandChainsAndMixedTypes) {
  const int64_t n = 3001;
  const auto x = T::uniform(T::Key(3), {n}, 0.5, 2), y = T::uniform(T::Key(4), {n}, -1, 1);
  const auto lx = T::lazy(x), ly = T::lazy(y);
  auto same = [](const T::Tensor& got, const T::Tensor& want) { EXPECT_EQ(got.toFloats(), want.toFloats()); };
  const auto one = T::scalar(1.0), two = T::scalar(2.0);
  // A value read by two operations is computed once, not fused into either.
  const auto e = lx.exp();
  same(((e + 1.0) * (e - 1.0)).eval(), x.exp().add(one).mul(x.exp().sub(one)));
  // The same value on both sides of an operation.
  const auto s = lx + 1.0;
  same((s * s).eval(), x.add(one).mul(x.add(one)));
  // An operand that is a chain of its own, constants on the left of non-commutative operations.
  same(((lx * 2.0).sqrt() + (ly + 1.0).abs()).eval(), x.mul(two).sqrt().add(y.add(one).abs()));
  same((T::Lazy(2.0) - lx).div(T::Lazy(1.0) / ly).eval(), two.sub(x).div(one.div(y)));
  // Constants only.
  EXPECT_EQ((T::Lazy(2.0) + T::Lazy(3.0)).sqrt().eval().toFloats(), std::vector<float>{std::sqrt(5.0f)});
  // A broadcast operand and an F16 step in the middle (rounded, so not part of the chain).
  const auto row = T::uniform(T::Key(5), {1, n}, -1, 1), column = T::uniform(T::Key(6), {4, 1}, -1, 1);
  same((T::lazy(row) * T::lazy(column) + 0.5).relu().eval(), row.mul(column).add(T::scalar(0.5)).relu());
  same((lx * 3.0).cast(DType::F16).add(1.0).cast(DType::F32).sqrt().eval(),
       x.mul(T::scalar(3.0)).cast(DType::F16).add(T::scalar(1.0, DType::F16)).cast(DType::F32).sqrt());
}

TEST(LazyChains, LargeResultsAreStreamedAlignedOrNot) {
  // Above the streaming threshold (32 MiB), into a fresh result and into an unaligned view.
  const int64_t n = (int64_t{8} << 20) + 5;
  const auto x = T::uniform(T::Key(8), {n}, -1, 1);
  const std::vector<Link> links = {{Link::Scalar, static_cast<int>(BinaryOp::Mul), 1.5},
                                   {Link::Scalar, static_cast<int>(BinaryOp::Add), 0.25},
                                   {Link::Unary, static_cast<int>(UnaryOp::Relu)}};
  const auto chain = ((T::lazy(x) * 1.5) + 0.25).relu();
  const auto want = opByOp(x.toFloats(), links, {});
  expectSameBits(chain.eval().toFloats(), want, "fresh result");
  const auto wide = T::zeros({n + 1});
  const auto shifted = wide.slice(0, 1, n + 1);  // 4 bytes past a vector boundary
  chain.evalInto(shifted);
  expectSameBits(shifted.toFloats(), want, "unaligned output");
}
