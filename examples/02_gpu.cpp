// Step 2 of the guide: the same work on a GPU. gizhw::gpu::open() finds one or gives none;
// on(gpu) copies a tensor there, operations on GPU tensors run there, host() copies back.
// The program prints the same line with or without a GPU.
#include <gizhw/gpu.h>
#include <gizml/tensor.h>

#include <iostream>

using namespace gizml;
namespace Gpu = gizhw::gpu;

int main() {
  const auto a = T::tensor({2, 3}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0});
  const auto b = T::tensor({3, 2}, {1.0, 0.0, 0.0, 1.0, 1.0, 1.0});
  auto c = a.matmul(b);
  if (auto gpu = Gpu::open()) {
    // On a GPU, the same call runs there; host() copies the result back.
    c = a.on(*gpu).matmul(b.on(*gpu)).host();
  }
  std::cout << c.text() << "\n";
}
