// gizml::grad against torch's autograd: the fixtures of tests/reference/make_grad_fixtures.py.
// Forward values and gradients agree within 2e-5 + 2e-4 |expected| (f32 results whose order of
// additions differs from torch's: reductions, matmul, norms).
#include <gizml/grad.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/fixture_file.h"
#include "common/test_paths.h"

using namespace gizml;
using fixture::Case;

namespace {

// "x0", "g1": array names. (Built without operator+ on a literal: g++ 12 -O3 warns falsely.)
std::string arrayName(char prefix, size_t i) {
  std::string name(1, prefix);
  name.append(std::to_string(i));
  return name;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = fixture::loadFixtures(test_paths::testData() + "/grad/torch.bin");
  return all;
}

T::Tensor toTensor(const fixture::Array& a) {
  T::Tensor t = T::empty(a.shape, static_cast<DType>(a.dtype));
  if (!a.data.empty()) std::memcpy(t.rawData(), a.data.data(), a.data.size());
  return t;
}

grad::Value apply(grad::Graph& g, const Case& c, const std::vector<grad::Value>& x) {
  const std::string& op = c.op;
  auto axes = [&] { return c.list("axes"); };
  if (op == "add") return g.add(x[0], x[1]);
  if (op == "sub") return g.sub(x[0], x[1]);
  if (op == "mul") return g.mul(x[0], x[1]);
  if (op == "div") return g.div(x[0], x[1]);
  if (op == "pow") return g.pow(x[0], x[1]);
  if (op == "neg") return g.neg(x[0]);
  if (op == "exp") return g.exp(x[0]);
  if (op == "log") return g.log(x[0]);
  if (op == "sqrt") return g.sqrt(x[0]);
  if (op == "tanh") return g.tanh(x[0]);
  if (op == "sigmoid") return g.sigmoid(x[0]);
  if (op == "relu") return g.relu(x[0]);
  if (op == "silu") return g.silu(x[0]);
  if (op == "gelu") return g.gelu(x[0]);
  if (op == "matmul") return g.matmul(x[0], x[1]);
  if (op == "sum") return g.sum(x[0], axes(), c.attr("keepdim") != 0);
  if (op == "mean") return g.mean(x[0], axes(), c.attr("keepdim") != 0);
  if (op == "max") return g.max(x[0], axes(), c.attr("keepdim") != 0);
  if (op == "softmax") return g.softmax(x[0], c.attr("axis"));
  if (op == "logsoftmax") return g.logSoftmax(x[0], c.attr("axis"));
  if (op == "reshape") return g.reshape(x[0], c.list("shape"));
  if (op == "permute") return g.permute(x[0], c.list("axes"));
  if (op == "slice") return g.slice(x[0], c.attr("axis"), c.attr("start"), c.attr("stop"), c.attr("step"));
  if (op == "broadcast") return g.broadcast(x[0], c.list("shape"));
  if (op == "concat") return g.concat({x[0], x[1], x[0]}, c.attr("axis"));
  if (op == "repeated") return g.mul(g.add(x[0], x[0]), g.tanh(x[0]));
  if (op == "crossentropy") return g.crossEntropy(x[0], toTensor(c.array("ints")));
  if (op == "layernorm") return g.layerNorm(x[0], x[1], x[2], 1e-5);
  if (op == "rmsnorm") return g.rmsNorm(x[0], x[1], 1e-6);
  if (op == "embedding") return g.embedding(x[0], toTensor(c.array("ints")));
  throw std::runtime_error("no recipe for op " + op);
}

void expectClose(const std::vector<double>& got, const T::Tensor& expected, const std::string& what) {
  const std::vector<double> want = expected.toDoubles();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 2e-5 + 2e-4 * std::abs(want[i])) << what << " element " << i;
}

class TorchReference : public ::testing::TestWithParam<size_t> {};

TEST_P(TorchReference, GradientsMatch) {
  const Case& c = cases()[GetParam()];
  const auto& transposed = c.list("transposed");
  grad::Graph g;
  std::vector<grad::Value> inputs;
  for (size_t i = 0; c.find(arrayName('x', i)); ++i) {
    T::Tensor t = toTensor(c.array(arrayName('x', i)));
    if (std::find(transposed.begin(), transposed.end(), static_cast<int64_t>(i)) != transposed.end()) t = t.transpose(0, 1);
    inputs.push_back(g.input(t));
  }
  const grad::Value y = apply(g, c, inputs);
  expectClose(g.value(y).toDoubles(), toTensor(c.array("out")), "forward");
  const grad::Value loss = g.sum(g.mul(y, g.constant(toTensor(c.array("w")))));
  const grad::Grads grads = g.backward(loss);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const T::Tensor expected = toTensor(c.array(arrayName('g', i)));
    EXPECT_EQ(grads.of(inputs[i]).shape(), expected.shape()) << "gradient " << i;
    expectClose(grads.of(inputs[i]).toDoubles(), expected, arrayName('g', i));
  }
}

std::vector<size_t> indices() {
  std::vector<size_t> v(cases().size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = i;
  return v;
}

INSTANTIATE_TEST_SUITE_P(Torch, TorchReference, ::testing::ValuesIn(indices()),
                         [](const ::testing::TestParamInfo<size_t>& info) { return cases()[info.param].name; });

TEST(TorchReferenceFixtures, Loaded) { EXPECT_GE(cases().size(), 30u); }

}  // namespace
