// Tile programs on the CPU: the guide's kernels, masks at the edges, broadcasting, reductions,
// and every operation against the tensor operation it mirrors.
#include <gizml/tile.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "programs.h"

using namespace gizml;

namespace {

// The guide's product in bm x bn blocks with k blocks of bk.
T::Tensor product(const T::Tensor& a, const T::Tensor& b, int64_t bm, int64_t bn, int64_t bk) {
  return Tile::run(tileprog::productGrid(a, b, bm, bn), tileprog::product(a, b, bm, bn, bk))[0];
}

// Whether two tensors hold the same bits (NaNs of any payload count as equal).
void expectSameBits(const T::Tensor& got, const T::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const auto g = got.toFloats(), w = want.toFloats();
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) && std::isnan(w[i])) continue;
    uint32_t gb, wb;
    std::memcpy(&gb, &g[i], 4);
    std::memcpy(&wb, &w[i], 4);
    ASSERT_EQ(gb, wb) << what << " element " << i << ": " << g[i] << " vs " << w[i];
  }
}

// Runs f on the tiles of x (and y) in 16 x 16 blocks over the whole tensor, into an F32 tensor
// of x's shape (or dtype).
T::Tensor map2(const T::Tensor& x, const T::Tensor& y, DType out,
               const std::function<Tile::Tile(Tile::Tile, Tile::Tile)>& f) {
  return Tile::run({Tile::cdiv(x.size(0), 16), Tile::cdiv(x.size(1), 16)}, [&](Tile::Program& p) {
    const auto i = p.id(0), j = p.id(1);
    const auto a = p.read(x, {16, 16}).at({i, j}), b = p.read(y, {16, 16}).at({i, j});
    p.write(T::zeros(x.shape(), out), {16, 16}).put(f(a, b), {i, j});
  })[0];
}

}  // namespace

TEST(TileCpu, GuideExample) {
  const auto x = T::tensor({4, 4}, {-2, -1, 0, 1, 2, 3, 4, 5, -3, -4, 6, 7, 8, -9, 1, 0.5});
  const auto w = T::tensor({1, 4}, {1, 2, 3, 4});
  const auto y = Tile::run({1}, [&](Tile::Program& p) {
    const auto z = p.index(0);
    const auto a = p.read(x, {4, 4}).at({z, z});
    const auto s = p.read(w, {1, 4}).at({z, z});
    p.write(T::zeros({4, 4}), {4, 4}).put((a * s + 1.0).relu(), {z, z});
  });
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(y[0].text(), "[[0, 0, 1, 5], [3, 7, 13, 21], [0, 0, 19, 29], [9, 0, 4, 3]]");
}

TEST(TileCpu, ProductOfOddShapes) {
  const auto a = T::uniform(T::Key(1), {1000, 333}, -1, 1), b = T::uniform(T::Key(2), {333, 777}, -1, 1);
  const auto want = T::matmul(a, b).toFloats();
  const auto got = product(a, b, 128, 128, 32).toFloats();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << "element " << i;
}

TEST(TileCpu, ProductAgainstADoubleReference) {
  // The guide's product at 1000 x 333 x 777 (edge blocks on every axis, a k block cut short)
  // against sums in double: an f32 sum of 333 products of values in [-1, 1] errs by far less
  // than 1e-4. Then with the operands as transposed views (read in place through strides).
  const int64_t m = 1000, k = 333, n = 777;
  const auto a = T::uniform(T::Key(21), {m, k}, -1, 1), b = T::uniform(T::Key(22), {k, n}, -1, 1);
  const auto av = a.toFloats(), bv = b.toFloats();
  std::vector<double> want(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      const double x = av[static_cast<size_t>(i * k + p)];
      for (int64_t j = 0; j < n; ++j) want[static_cast<size_t>(i * n + j)] += x * bv[static_cast<size_t>(p * n + j)];
    }
  const auto check = [&](const T::Tensor& c, const char* what) {
    ASSERT_EQ(c.shape(), (T::Shape{m, n})) << what;
    const auto got = c.toFloats();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << what << " element " << i;
  };
  check(product(a, b, 128, 128, 32), "contiguous");
  check(product(a.transpose(0, 1).contiguous().transpose(0, 1), b.transpose(0, 1).contiguous().transpose(0, 1),
                128, 128, 32),
        "transposed views");
}

TEST(TileCpu, DotAccumulatorsThatLiveOn) {
  // The executor accumulates a dot in its accumulator's buffer only where nothing reads the
  // accumulator afterwards. Here something does: the fold's accumulator after the dot, a tile
  // from outside the fold (read again by the next pass), and the accumulator as the dot's own
  // operand. Each against the same steps in tensor operations (the same bits: a dot with an
  // accumulator is one chain of products, then one addition).
  const auto a = T::uniform(T::Key(23), {8, 24}, -1, 1), b = T::uniform(T::Key(24), {24, 8}, -1, 1);
  const auto x = T::uniform(T::Key(25), {8, 8}, -1, 1);
  const auto out = Tile::run({1}, [&](Tile::Program& p) {
    const auto A = p.read(a, {8, 8}), B = p.read(b, {8, 8});
    const auto X = p.read(x, {8, 8}).at({0, 0});
    const auto y = p.fold(0, 3, p.zeros({8, 8}), [&](Tile::Index k, Tile::Tile acc) {
      const auto d = acc + A.at({0, k}).dot(B.at({k, 0}));
      return d * 0.5 + acc;
    });
    const auto z = p.fold(0, 3, p.zeros({8, 8}), [&](Tile::Index k, Tile::Tile acc) {
      return acc + (X + A.at({0, k}).dot(B.at({k, 0})));
    });
    const auto w = p.fold(0, 3, X, [&](Tile::Index, Tile::Tile acc) { return acc + acc.dot(X); });
    p.write(T::zeros({8, 8}), {8, 8}).put(y, {0, 0});
    p.write(T::zeros({8, 8}), {8, 8}).put(z, {0, 0});
    p.write(T::zeros({8, 8}), {8, 8}).put(w, {0, 0});
    p.write(T::zeros({8, 8}), {8, 8}).put(X, {0, 0});
  });
  auto y = T::zeros({8, 8}), z = T::zeros({8, 8}), w = x;
  for (int64_t k = 0; k < 3; ++k) {
    const auto ak = a.slice(1, 8 * k, 8 * k + 8), bk = b.slice(0, 8 * k, 8 * k + 8);
    y = y.add(T::matmul(ak, bk)).mul(T::scalar(0.5)).add(y);
    z = z.add(x.add(T::matmul(ak, bk)));
    w = w.add(T::matmul(w, x));
  }
  expectSameBits(out[0], y, "accumulator read after the dot");
  expectSameBits(out[1], z, "accumulator from outside the fold");
  expectSameBits(out[2], w, "accumulator as the dot's operand");
  expectSameBits(out[3], x, "the tile from outside the fold, after the folds");
}

TEST(TileCpu, ReadingWhatThePointWrote) {
  // Each point multiplies its rows of x by w three times in place: the fold reads the block it
  // wrote in the pass before, so packed blocks of x must not be kept from pass to pass.
  const auto x = T::uniform(T::Key(26), {16, 8}, -1, 1), w = T::uniform(T::Key(27), {8, 8}, -1, 1);
  auto want = x.clone();
  for (int pass = 0; pass < 3; ++pass) want = T::matmul(want, w);
  Tile::run({2}, [&](Tile::Program& p) {
    const auto i = p.id(0);
    const auto X = p.read(x, {8, 8});
    const auto W = p.read(w, {8, 8}).at({0, 0});
    const auto out = p.write(x, {8, 8});
    p.fold(0, 3, p.zeros({8, 8}), [&](Tile::Index, Tile::Tile acc) {
      const auto t = X.at({i, 0}).dot(W);
      out.put(t, {i, 0});
      return acc + t;
    });
  });
  expectSameBits(x, want, "x w w w");
}

TEST(TileCpu, ARunAfterTheTensorChanged) {
  // Threads keep their buffers from run to run, but not the packed blocks: the second product
  // reads the same addresses holding other values.
  const auto a = T::uniform(T::Key(28), {256, 64}, -1, 1), b = T::uniform(T::Key(29), {64, 512}, -1, 1);
  const auto check = [&](const char* what) {
    const auto got = product(a, b, 128, 128, 32).toFloats(), want = T::matmul(a, b).toFloats();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << what << " element " << i;
  };
  check("first");
  T::assign(a, T::uniform(T::Key(30), {256, 64}, -1, 1));
  check("after the change");
}

TEST(TileCpu, ProductOfTransposedViewsAndSmallBlocks) {
  // Strided operands read through their strides; blocks of 16 x 8 with k blocks of 5.
  const auto at = T::uniform(T::Key(3), {19, 45}, -1, 1), b = T::uniform(T::Key(4), {19, 23}, -1, 1);
  const auto a = at.transpose(0, 1);
  const auto want = T::matmul(a, b).toFloats(), got = product(a, b, 16, 8, 5).toFloats();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << "element " << i;
}

TEST(TileCpu, MasksReadFillOutsideAndWriteNothingOutside) {
  const auto x = T::arange(1, 16).reshape({5, 3});
  // The [8, 4] output's blocks cover x and more: outside x the read gives the fill value 7.
  const auto y = Tile::run({2, 1}, [&](Tile::Program& p) {
    const auto i = p.id(0);
    const auto t = p.read(x, {4, 4}, 7.0).at({i, 0});
    p.write(T::zeros({8, 4}), {4, 4}).put(t, {i, 0});
  })[0];
  EXPECT_EQ(y.text(), "[[1, 2, 3, 7], [4, 5, 6, 7], [7, 8, 9, 7], [10, 11, 12, 7], [13, 14, 15, 7], "
                      "[7, 7, 7, 7], [7, 7, 7, 7], [7, 7, 7, 7]]");
  // Writing into a [3, 2] view of a larger tensor leaves the rest of it untouched.
  const auto big = T::full({4, 4}, -1.0);
  const auto view = big.slice(0, 1, 4).slice(1, 1, 3);
  Tile::run({1}, [&](Tile::Program& p) { p.write(view, {4, 4}).put(p.full({4, 4}, 5.0), {0, 0}); });
  EXPECT_EQ(big.text(), "[[-1, -1, -1, -1], [-1, 5, 5, -1], [-1, 5, 5, -1], [-1, 5, 5, -1]]");
}

TEST(TileCpu, ElementwiseOverOddShapesMatchesTensors) {
  // 1000 x 777 in 64 x 128 blocks: edge blocks on both axes.
  const auto x = T::uniform(T::Key(5), {1000, 777}, -3, 3), y = T::uniform(T::Key(6), {1000, 777}, -3, 3);
  const auto got = Tile::run({Tile::cdiv(1000, 64), Tile::cdiv(777, 128)}, [&](Tile::Program& p) {
    const auto i = p.id(0), j = p.id(1);
    const auto a = p.read(x, {64, 128}).at({i, j}), b = p.read(y, {64, 128}).at({i, j});
    p.write(T::zeros({1000, 777}), {64, 128}).put((a * b + 1.0).silu(), {i, j});
  })[0];
  expectSameBits(got, x.mul(y).add(T::scalar(1.0)).silu(), "silu(x * y + 1)");
}

TEST(TileCpu, BroadcastingRowsAndColumns) {
  const auto x = T::uniform(T::Key(7), {4, 4}), row = T::uniform(T::Key(8), {1, 4}),
             col = T::uniform(T::Key(9), {4, 1});
  const auto out = Tile::run({1}, [&](Tile::Program& p) {
    const auto a = p.read(x, {4, 4}).at({0, 0});
    const auto r = p.read(row, {1, 4}).at({0, 0}), c = p.read(col, {4, 1}).at({0, 0});
    p.write(T::zeros({4, 4}), {4, 4}).put(a * r, {0, 0});
    p.write(T::zeros({4, 4}), {4, 4}).put(c - a, {0, 0});
    p.write(T::zeros({4, 4}), {4, 4}).put(r + c, {0, 0});
    p.write(T::zeros({4, 4}), {4, 4}).put(Tile::where(a > 0.5, r, c), {0, 0});
  });
  expectSameBits(out[0], x.mul(row), "x * row");
  expectSameBits(out[1], col.sub(x), "col - x");
  expectSameBits(out[2], row.add(col), "row + col");
  expectSameBits(out[3], T::where(x.gt(T::scalar(0.5)), row.expand({4, 4}), col.expand({4, 4})), "where");
}

TEST(TileCpu, ReductionsAlongEachAxis) {
  // Softmax of rows, and sums, maxima and minima along both axes, as the tensor reductions give.
  const auto x = T::normal(T::Key(10), {16, 40});
  const auto out = Tile::run({1}, tileprog::reductions(x));
  expectSameBits(out[0], x.softmax(1), "softmax");
  expectSameBits(out[1], x.sum({0}, true), "sum 0");
  expectSameBits(out[2], x.sum({1}, true), "sum 1");
  expectSameBits(out[3], x.max({0}, true), "max 0");
  expectSameBits(out[4], x.min({1}, true), "min 1");
}

TEST(TileCpu, EveryOperationMatchesItsTensorOperation) {
  // 37 x 29 in 16 x 16 blocks: every block but one is cut by the edges.
  const auto x = T::uniform(T::Key(11), {37, 29}, -4, 4), y = T::uniform(T::Key(12), {37, 29}, -4, 4);
  using U = std::pair<const char*, std::function<Tile::Tile(const Tile::Tile&)>>;
  using TU = std::function<T::Tensor(const T::Tensor&)>;
  const std::vector<std::pair<U, TU>> unary = {
      {{"neg", [](auto& t) { return t.neg(); }}, [](auto& t) { return t.neg(); }},
      {{"abs", [](auto& t) { return t.abs(); }}, [](auto& t) { return t.abs(); }},
      {{"exp", [](auto& t) { return t.exp(); }}, [](auto& t) { return t.exp(); }},
      {{"log", [](auto& t) { return t.log(); }}, [](auto& t) { return t.log(); }},
      {{"sqrt", [](auto& t) { return t.sqrt(); }}, [](auto& t) { return t.sqrt(); }},
      {{"rsqrt", [](auto& t) { return t.rsqrt(); }}, [](auto& t) { return t.rsqrt(); }},
      {{"sin", [](auto& t) { return t.sin(); }}, [](auto& t) { return t.sin(); }},
      {{"cos", [](auto& t) { return t.cos(); }}, [](auto& t) { return t.cos(); }},
      {{"tanh", [](auto& t) { return t.tanh(); }}, [](auto& t) { return t.tanh(); }},
      {{"sigmoid", [](auto& t) { return t.sigmoid(); }}, [](auto& t) { return t.sigmoid(); }},
      {{"relu", [](auto& t) { return t.relu(); }}, [](auto& t) { return t.relu(); }},
      {{"silu", [](auto& t) { return t.silu(); }}, [](auto& t) { return t.silu(); }},
      {{"gelu", [](auto& t) { return t.gelu(); }}, [](auto& t) { return t.gelu(); }},
      {{"geluTanh", [](auto& t) { return t.geluTanh(); }}, [](auto& t) { return t.geluTanh(); }},
      {{"floor", [](auto& t) { return t.floor(); }}, [](auto& t) { return t.floor(); }},
      {{"ceil", [](auto& t) { return t.ceil(); }}, [](auto& t) { return t.ceil(); }},
      {{"round", [](auto& t) { return t.round(); }}, [](auto& t) { return t.round(); }},
      {{"sign", [](auto& t) { return t.sign(); }}, [](auto& t) { return t.sign(); }},
  };
  for (const auto& [tileOp, tensorOp] : unary) {
    const auto& f = tileOp.second;  // clang 14 lambdas cannot capture structured bindings
    expectSameBits(map2(x, y, DType::F32, [&](auto a, auto) { return f(a); }), tensorOp(x), tileOp.first);
  }

  using B = std::function<Tile::Tile(const Tile::Tile&, const Tile::Tile&)>;
  using TB = std::function<T::Tensor(const T::Tensor&, const T::Tensor&)>;
  const std::vector<std::tuple<const char*, B, TB, DType>> binary = {
      {"add", [](auto& a, auto& b) { return a + b; }, [](auto& a, auto& b) { return a.add(b); }, DType::F32},
      {"sub", [](auto& a, auto& b) { return a - b; }, [](auto& a, auto& b) { return a.sub(b); }, DType::F32},
      {"mul", [](auto& a, auto& b) { return a * b; }, [](auto& a, auto& b) { return a.mul(b); }, DType::F32},
      {"div", [](auto& a, auto& b) { return a / b; }, [](auto& a, auto& b) { return a.div(b); }, DType::F32},
      {"pow", [](auto& a, auto& b) { return a.pow(b); }, [](auto& a, auto& b) { return a.pow(b); }, DType::F32},
      {"min", [](auto& a, auto& b) { return a.min(b); }, [](auto& a, auto& b) { return a.min(b); }, DType::F32},
      {"max", [](auto& a, auto& b) { return a.max(b); }, [](auto& a, auto& b) { return a.max(b); }, DType::F32},
      {"mod", [](auto& a, auto& b) { return a.mod(b); }, [](auto& a, auto& b) { return a.mod(b); }, DType::F32},
      {"eq", [](auto& a, auto& b) { return a.eq(b); }, [](auto& a, auto& b) { return a.eq(b); }, DType::Bool},
      {"ne", [](auto& a, auto& b) { return a.ne(b); }, [](auto& a, auto& b) { return a.ne(b); }, DType::Bool},
      {"lt", [](auto& a, auto& b) { return a < b; }, [](auto& a, auto& b) { return a.lt(b); }, DType::Bool},
      {"le", [](auto& a, auto& b) { return a <= b; }, [](auto& a, auto& b) { return a.le(b); }, DType::Bool},
      {"gt", [](auto& a, auto& b) { return a > b; }, [](auto& a, auto& b) { return a.gt(b); }, DType::Bool},
      {"ge", [](auto& a, auto& b) { return a >= b; }, [](auto& a, auto& b) { return a.ge(b); }, DType::Bool},
  };
  for (const auto& [name, tileOp, tensorOp, dtype] : binary)
    expectSameBits(map2(x, y, dtype, tileOp), tensorOp(x, y), name);
  // Ties for the comparisons: y equal to x on every other element.
  const auto z = T::where(T::arange(0, 37 * 29).reshape({37, 29}).mod(T::scalar(2)).eq(T::scalar(0)), x, y);
  expectSameBits(map2(x, z, DType::Bool, [](auto a, auto b) { return a.le(b); }), x.le(z), "le ties");
  expectSameBits(map2(x, y, DType::F32, [](auto a, auto b) { return Tile::where(a < b, a * 2.0, 3.0 - b); }),
                 T::where(x.lt(y), x.mul(T::scalar(2.0)), T::scalar(3.0).sub(y)), "where");
}

TEST(TileCpu, HalfPrecisionRoundsAfterEachStep) {
  for (DType d : {DType::F16, DType::BF16}) {
    const auto x = T::uniform(T::Key(13), {20, 30}, -2, 2, d), y = T::uniform(T::Key(14), {20, 30}, -2, 2, d);
    expectSameBits(map2(x, y, d, [](auto a, auto b) { return (a * b + a).exp(); }),
                   x.mul(y).add(x).exp(), dtypeName(d));
    expectSameBits(map2(x, y, DType::F32, [](auto a, auto) { return a.cast(DType::F32) / 3.0; }),
                   x.cast(DType::F32).div(T::scalar(3.0)), "cast");
  }
}

TEST(TileCpu, FoldWithTracedBoundsAndStages) {
  // Row i of the output sums the blocks 0..i of x's columns: a count that depends on p.id.
  const auto x = T::arange(0, 24).reshape({2, 12});
  const auto y = Tile::run({3}, [&](Tile::Program& p) {
    p.stages(3);
    const auto i = p.id(0);
    const auto X = p.read(x, {2, 4});
    const auto s = p.fold(0, i + 1, p.zeros({2, 1}), [&](Tile::Index k, Tile::Tile acc) {
      return acc + X.at({0, k}).sum(1);
    });
    p.write(T::zeros({2, 3}), {2, 1}).put(s, {0, i});
  })[0];
  EXPECT_EQ(y.text(), "[[6, 28, 66], [54, 124, 210]]");
}

TEST(TileCpu, EmptyGridWritesNothing) {
  const auto y = Tile::run({0}, [&](Tile::Program& p) { p.write(T::ones({3}), {4}).put(p.zeros({4}), {p.id(0)}); })[0];
  EXPECT_EQ(y.text(), "[1, 1, 1]");
}
