#pragma once
// Two small kernels the graph tests record and replay (test_graph.cpp, test_step_graph.cpp):
// graph_mix(x, y, a, n): y = sin(x a) + y / 2; graph_square(y, n): y = y^2 - 1/4.

namespace gizml::test {

inline const char* const kGraphKernels = R"(
extern "C" __global__ void graph_mix(const float* x, float* y, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = sinf(x[i] * a) + y[i] * 0.5f;
}
extern "C" __global__ void graph_square(float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = y[i] * y[i] - 0.25f;
}
)";

}  // namespace gizml::test
