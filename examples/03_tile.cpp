// Step 3 of the guide: tile programs. The first says what one 4 x 4 block of the output is; the
// second is the guide's matrix product in 128 x 128 blocks, checked on two small matrices.
#include <gizml/tile.h>

#include <iostream>

using namespace gizml;

/// The product of a ([m, k]) and b ([k, n]).
T::Tensor product(const T::Tensor& a, const T::Tensor& b, int64_t m, int64_t n) {
  return Tile::run({Tile::cdiv(m, 128), Tile::cdiv(n, 128)}, [&](Tile::Program& p) {
    const auto i = p.id(0), j = p.id(1);
    const auto A = p.read(a, {128, 32}), B = p.read(b, {32, 128});
    const auto acc = p.fold(p.index(0), A.blocks(1), p.zeros({128, 128}),
                            [&](Tile::Index k, Tile::Tile acc) { return acc + A.at({i, k}).dot(B.at({k, j})); });
    p.write(T::zeros({m, n}), {128, 128}).put(acc, {i, j});
  })[0];
}

int main() {
  const auto x = T::tensor({4, 4}, {-2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, -3.0, -4.0, 6.0, 7.0, 8.0, -9.0, 1.0, 0.5});
  const auto w = T::tensor({1, 4}, {1.0, 2.0, 3.0, 4.0});
  const auto y = Tile::run({1}, [&](Tile::Program& p) {
    const auto z = p.index(0);
    const auto a = p.read(x, {4, 4}).at({z, z});
    const auto s = p.read(w, {1, 4}).at({z, z});
    // One block of the output: max(a * s + 1, 0). Rows broadcast against s.
    const auto t = a * s;
    p.write(T::zeros({4, 4}), {4, 4}).put((t + 1.0).relu(), {z, z});
  })[0];
  std::cout << y.text() << "\n";

  const auto a = T::tensor({2, 3}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0});
  const auto b = T::tensor({3, 2}, {1.0, 0.0, 0.0, 1.0, 1.0, 1.0});
  std::cout << product(a, b, 2, 2).text() << "\n";
}
