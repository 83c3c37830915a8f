// Step 4 of the guide: gradients of built-in operations, and a tile-program kernel of your own
// joining a graph through custom, with its own gradient kernels.
#include <gizml/grad.h>
#include <gizml/tile.h>

#include <iostream>

using namespace gizml;

/// x * y elementwise, written as a tile program.
T::Tensor product(const T::Tensor& x, const T::Tensor& y) {
  return Tile::run({1}, [&](Tile::Program& p) {
    const auto z = p.index(0);
    const auto a = p.read(x, {4, 4}).at({z, z});
    const auto b = p.read(y, {4, 4}).at({z, z});
    p.write(T::zeros(x.shape()), {4, 4}).put(a * b, {z, z});
  })[0];
}

int main() {
  const auto a = T::tensor({2, 2}, {1.0, 2.0, 3.0, 4.0});
  const auto b = T::tensor({2, 2}, {5.0, 6.0, 7.0, 8.0});
  // Built-in operations: the gradient of sum(a * b) is b for a and a for b.
  auto g = G::graph();
  const auto x = g.input(a), y = g.input(b);
  const auto grads = g.backward(g.sum(g.mul(x, y)));
  std::cout << grads.of(x).text() << "\n";
  // Your own kernel with its own gradient kernels is one operation of the graph.
  auto h = G::graph();
  const auto hx = h.input(a), hy = h.input(b);
  const auto xy = h.custom({hx, hy}, product(a, b),
                           [&](const T::Tensor& d) { return std::vector<T::Tensor>{product(d, b), product(d, a)}; });
  std::cout << h.backward(h.sum(xy)).of(hy).text() << "\n";
}
