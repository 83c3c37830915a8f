#pragma once
// The tile programs of the tests, as bodies over given tensors: the CPU tests' programs, which
// tests/tile/test_cuda.cpp compiles for the GPU and tests/tile/test_gpu_run.cpp runs on it
// against the CPU executor.
#include <gizml/tile.h>

#include <optional>
#include <vector>

namespace tileprog {

using namespace gizml;

/// The guide's first program: max(x * w + 1, 0) for x [4, 4] and w [1, 4].
inline Tile::Body guide(const T::Tensor& x, const T::Tensor& w) {
  return [=](Tile::Program& p) {
    const auto z = p.index(0);
    const auto t = p.read(x, {4, 4}).at({z, z}) * p.read(w, {1, 4}).at({z, z});
    p.write(T::zeros({4, 4}), {4, 4}).put((t + 1.0).relu(), {z, z});
  };
}

inline Tile::Grid productGrid(const T::Tensor& a, const T::Tensor& b, int64_t bm, int64_t bn) {
  return {Tile::cdiv(a.size(0), bm), Tile::cdiv(b.size(1), bn)};
}

/// The guide's product of a [m, k] and b [k, n] in bm x bn blocks with k blocks of bk, into an
/// F32 [m, n]; `cast` converts the operand tiles first (F32 tensors into BF16 tiles: the tensor
/// cores), `stages` is p.stages.
inline Tile::Body product(const T::Tensor& a, const T::Tensor& b, int64_t bm, int64_t bn, int64_t bk, int stages = 1,
                          std::optional<DType> cast = std::nullopt) {
  return [=](Tile::Program& p) {
    p.stages(stages);
    const auto i = p.id(0), j = p.id(1);
    const auto A = p.read(a, {bm, bk}), B = p.read(b, {bk, bn});
    const auto acc = p.fold(p.index(0), A.blocks(1), p.zeros({bm, bn}), [&](Tile::Index k, Tile::Tile acc) {
      auto x = A.at({i, k}), y = B.at({k, j});
      if (cast) {
        x = x.cast(*cast);
        y = y.cast(*cast);
      }
      return acc + x.dot(y);
    });
    p.write(T::zeros({a.size(0), b.size(1)}), {bm, bn}).put(acc, {i, j});
  };
}

/// Softmax of the rows of 16 x 16 blocks of h ([37, 29]: masks on both axes, fill -1), where,
/// casts, and a Bool output.
inline Tile::Body softmax(const T::Tensor& h) {
  return [=](Tile::Program& p) {
    const auto i = p.id(0), j = p.id(1);
    const auto t = p.read(h, {16, 16}, -1.0).at({i, j}).cast(DType::F32);
    const auto e = (t - t.max(1)).exp();
    const auto s = Tile::where(t > 0.0, e / e.sum(1), t.sigmoid().min(t.k(0.25)));
    p.write(T::zeros(h.shape(), h.dtype()), {16, 16}).put(s.cast(h.dtype()), {i, j});
    p.write(T::zeros(h.shape(), DType::Bool), {16, 16}).put(t.ge(t.k(0.5)), {i, j});
  };
}
inline Tile::Grid softmaxGrid(const T::Tensor& h) { return {Tile::cdiv(h.size(0), 16), Tile::cdiv(h.size(1), 16)}; }

/// Column i of the [2, 3] output sums the blocks 0..i of x's [2, 12] columns: a fold whose count
/// depends on p.id (grid [3]).
inline Tile::Body foldSums(const T::Tensor& x) {
  return [=](Tile::Program& p) {
    p.stages(3);
    const auto i = p.id(0);
    const auto X = p.read(x, {2, 4});
    const auto s = p.fold(0, i + 1, p.zeros({2, 1}), [&](Tile::Index k, Tile::Tile acc) { return acc + X.at({0, k}).sum(1); });
    p.write(T::zeros({2, 3}, x.dtype()), {2, 1}).put(s.cast(x.dtype()), {0, i});
  };
}

}  // namespace tileprog

namespace tileprog {

/// Every unary operation of x and every binary one of x and y ([37, 29] in 16 x 16 blocks: edges
/// on both axes), one output each, in the order of unaryNames() and binaryNames().
inline const std::vector<const char*>& unaryNames() {
  static const std::vector<const char*> names = {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh",
                                                 "sigmoid", "relu", "silu", "gelu", "geluTanh", "floor", "ceil", "round",
                                                 "sign"};
  return names;
}
inline const std::vector<const char*>& binaryNames() {
  static const std::vector<const char*> names = {"add", "sub", "mul", "div", "pow", "min", "max", "mod",
                                                 "eq",  "ne",  "lt",  "le",  "gt",  "ge",  "where"};
  return names;
}
inline Tile::Body everyOperation(const T::Tensor& x, const T::Tensor& y) {
  return [=](Tile::Program& p) {
    const auto i = p.id(0), j = p.id(1);
    const auto a = p.read(x, {16, 16}).at({i, j}), b = p.read(y, {16, 16}).at({i, j});
    const auto put = [&](const Tile::Tile& t) { p.write(T::zeros(x.shape(), t.dtype()), {16, 16}).put(t, {i, j}); };
    put(a.neg()); put(a.abs()); put(a.exp()); put(a.log()); put(a.sqrt()); put(a.rsqrt()); put(a.sin()); put(a.cos());
    put(a.tanh()); put(a.sigmoid()); put(a.relu()); put(a.silu()); put(a.gelu()); put(a.geluTanh()); put(a.floor());
    put(a.ceil()); put(a.round()); put(a.sign());
    put(a + b); put(a - b); put(a * b); put(a / b); put(a.pow(b)); put(a.min(b)); put(a.max(b)); put(a.mod(b));
    put(a.eq(b)); put(a.ne(b)); put(a < b); put(a <= b); put(a > b); put(a >= b);
    put(Tile::where(a < b, a * 2.0, 3.0 - b));
  };
}
inline Tile::Grid everyOperationGrid(const T::Tensor& x) { return {Tile::cdiv(x.size(0), 16), Tile::cdiv(x.size(1), 16)}; }

/// x [4, 4] with a row [1, 4] and a column [4, 1]: x * row, col - x, row + col, where(x > 0.5, row, col).
inline Tile::Body broadcasting(const T::Tensor& x, const T::Tensor& row, const T::Tensor& col) {
  return [=](Tile::Program& p) {
    const auto a = p.read(x, {4, 4}).at({0, 0});
    const auto r = p.read(row, {1, 4}).at({0, 0}), c = p.read(col, {4, 1}).at({0, 0});
    p.write(T::zeros({4, 4}), {4, 4}).put(a * r, {0, 0});
    p.write(T::zeros({4, 4}), {4, 4}).put(c - a, {0, 0});
    p.write(T::zeros({4, 4}), {4, 4}).put(r + c, {0, 0});
    p.write(T::zeros({4, 4}), {4, 4}).put(Tile::where(a > 0.5, r, c), {0, 0});
  };
}

/// x [16, 40]: softmax of rows, sums along both axes, max along 0, min along 1.
inline Tile::Body reductions(const T::Tensor& x) {
  return [=](Tile::Program& p) {
    const auto a = p.read(x, {16, 40}).at({0, 0});
    const auto e = (a - a.max(1)).exp();
    p.write(T::zeros({16, 40}), {16, 40}).put(e / e.sum(1), {0, 0});
    p.write(T::zeros({1, 40}), {1, 40}).put(a.sum(0), {0, 0});
    p.write(T::zeros({16, 1}), {16, 1}).put(a.sum(-1), {0, 0});
    p.write(T::zeros({1, 40}), {1, 40}).put(a.max(0), {0, 0});
    p.write(T::zeros({16, 1}), {16, 1}).put(a.min(1), {0, 0});
  };
}

/// x [5, 3] read in [4, 4] blocks with fill 7 into an [8, 4] output (grid [2, 1]).
inline Tile::Body masks(const T::Tensor& x) {
  return [=](Tile::Program& p) {
    const auto i = p.id(0);
    p.write(T::zeros({8, 4}), {4, 4}).put(p.read(x, {4, 4}, 7.0).at({i, 0}), {i, 0});
  };
}

/// 5 written into `view` (a view of a larger tensor) in one [4, 4] block (grid [1]).
inline Tile::Body fillView(const T::Tensor& view) {
  return [=](Tile::Program& p) { p.write(view, {4, 4}).put(p.full({4, 4}, 5.0), {0, 0}); };
}

/// An empty grid's program (grid [0]): nothing runs.
inline Tile::Body emptyGrid() {
  return [](Tile::Program& p) { p.write(T::ones({3}), {4}).put(p.zeros({4}), {p.id(0)}); };
}

}  // namespace tileprog
