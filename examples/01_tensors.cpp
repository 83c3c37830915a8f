// Step 1 of the guide: tensors on the CPU, and a fused elementwise chain.
#include <gizml/tensor.h>

#include <iostream>

using namespace gizml;

int main() {
  const auto a = T::tensor({2, 3}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0});
  const auto b = T::tensor({3, 2}, {1.0, 0.0, 0.0, 1.0, 1.0, 1.0});
  const auto c = a.matmul(b);
  std::cout << c.text() << "\n";
  // Elementwise chains run fused, in one pass over the data.
  const auto d = T::lazy(c).mul(T::lazy(T::scalar(0.5))).relu().eval();
  std::cout << d.text() << "\n";
}
