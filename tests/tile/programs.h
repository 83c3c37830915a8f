#pragma once
// The tile programs of the tests, as bodies over given tensors: the CPU tests' programs, which
// tests/tile/test_cuda.cpp compiles for the GPU and tests/tile/test_gpu_run.cpp runs on it
// against the CPU executor.
#include <gizml/tile.h>

#include <optional>

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
