// Gradients of GPU tensors: the same graph on the GPU and on the host gives the same gradients
// (within the GPU's rounding of exp and its products), on GPU tensors. Skipped without a GPU.
#include <gizhw/gpu.h>
#include <gizml/grad.h>
#include <gtest/gtest.h>

#include <cmath>

using namespace gizml;
using grad::Value;

namespace {

// A layer, a relu, a slice, a softmax and a cross entropy: the operations training reads.
std::vector<T::Tensor> gradients(const std::vector<T::Tensor>& inputs, const T::Tensor& labels) {
  grad::Graph g;
  std::vector<Value> v;
  for (const auto& t : inputs) v.push_back(g.input(t));
  const Value h = g.relu(g.add(g.matmul(v[0], v[1]), v[2]));
  const Value logits = g.slice(g.mul(h, g.sigmoid(h)), 1, 0, 5);
  const Value loss = g.add(g.crossEntropy(logits, labels), g.mean(g.softmax(g.tanh(v[0]), -1)));
  const grad::Grads grads = g.backward(loss);
  std::vector<T::Tensor> out;
  for (const Value& x : v) out.push_back(grads.of(x));
  return out;
}

}  // namespace

TEST(GradGpu, SameGradientsAsTheHost) {
  const auto gpu = gizhw::gpu::open();
  if (!gpu) GTEST_SKIP() << "no GPU found: GPU test skipped";
  const std::vector<T::Tensor> inputs = {T::uniform(T::Key(1), {8, 16}, -1, 1), T::uniform(T::Key(2), {16, 7}, -1, 1),
                                         T::uniform(T::Key(3), {7}, -0.5, 0.5)};
  const T::Tensor labels = T::tensor({8}, {0, 1, 2, 3, 4, 0, 1, 2}, DType::I64);
  std::vector<T::Tensor> onGpu;
  for (const auto& t : inputs) onGpu.push_back(t.on(*gpu));
  const auto host = gradients(inputs, labels);
  const auto device = gradients(onGpu, labels);
  for (size_t i = 0; i < host.size(); ++i) {
    EXPECT_TRUE(device[i].onGpu()) << "gradient " << i;
    const auto a = host[i].toDoubles(), b = device[i].host().toDoubles();
    ASSERT_EQ(a.size(), b.size());
    for (size_t j = 0; j < a.size(); ++j) EXPECT_NEAR(a[j], b[j], 1e-5 + 1e-4 * std::abs(a[j])) << i << " " << j;
  }
}
