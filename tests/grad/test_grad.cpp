// Gradients: the spec's example, f64 central differences for every operation (as torch's
// gradcheck, with its tolerances), memory release, and bad use.
#include <gizml/grad.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "common/expect_error.h"

using namespace gizml;
using Gr = grad::Graph;
using grad::Value;

namespace {

using Build = std::function<Value(Gr&, const std::vector<Value>&)>;

// The loss sum(f(inputs) * weights) in double, for fixed random weights of f's output shape.
double lossOf(const Build& f, const std::vector<T::Tensor>& inputs, std::vector<double>* weights) {
  Gr g;
  std::vector<Value> vs;
  for (const auto& t : inputs) vs.push_back(g.input(t));
  const std::vector<double> out = g.value(f(g, vs)).toDoubles();
  if (weights->empty())
    for (size_t i = 0; i < out.size(); ++i) weights->push_back(std::sin(1.7 * static_cast<double>(i) + 0.3));
  double s = 0;
  for (size_t i = 0; i < out.size(); ++i) s += out[i] * (*weights)[i];
  return s;
}

// A tensor with the layout of `like` (its strides and offset in a copy of its storage: a view
// stays a view) holding `values` in row-major order.
T::Tensor withValues(const T::Tensor& like, const std::vector<double>& values) {
  const auto storage = std::make_shared<T::Storage>(like.storage()->bytes());
  std::memcpy(storage->data(), like.storage()->data(), like.storage()->bytes());
  const T::Tensor t(storage, like.dtype(), like.shape(), like.strides(), like.offset());
  T::assign(t, T::tensor(like.shape(), values, like.dtype()));
  return t;
}

// Checks backward against central differences as torch.autograd.gradcheck does: the inputs in
// F64 (F64 views stay views; others are cast), every operation in f64, step h = 1e-6, and
// |analytic - numeric| <= atol + rtol |numeric| with torch's atol = 1e-5 and rtol = 1e-3.
void checkGradients(const Build& f, const std::vector<T::Tensor>& given) {
  constexpr double h = 1e-6, atol = 1e-5, rtol = 1e-3;
  std::vector<T::Tensor> inputs;
  for (const auto& t : given) inputs.push_back(t.dtype() == DType::F64 ? t : t.cast(DType::F64));
  std::vector<double> weights;
  lossOf(f, inputs, &weights);
  Gr g;
  std::vector<Value> vs;
  for (const auto& t : inputs) vs.push_back(g.input(t));
  const Value y = f(g, vs);
  ASSERT_EQ(g.value(y).dtype(), DType::F64) << "the forward pass left f64";
  const T::Tensor w = T::tensor(g.value(y).shape(), weights, DType::F64);
  const Value loss = g.sum(g.mul(y, g.constant(w)));
  const grad::Grads grads = g.backward(loss);
  for (size_t k = 0; k < inputs.size(); ++k) {
    ASSERT_EQ(grads.of(vs[k]).dtype(), DType::F64) << "the gradient of input " << k << " left f64";
    const std::vector<double> analytic = grads.of(vs[k]).toDoubles();
    const std::vector<double> base = inputs[k].toDoubles();
    ASSERT_EQ(analytic.size(), base.size());
    for (size_t i = 0; i < base.size(); ++i) {
      auto perturbed = [&](double delta) {
        std::vector<T::Tensor> in = inputs;
        std::vector<double> values = base;
        values[i] += delta;
        in[k] = withValues(inputs[k], values);
        return lossOf(f, in, &weights);
      };
      const double numeric = (perturbed(h) - perturbed(-h)) / (2 * h);
      EXPECT_NEAR(analytic[i], numeric, atol + rtol * std::abs(numeric)) << "input " << k << " element " << i;
    }
  }
}

// Uniform values (24 random bits each) in [lo, hi), F64 unless said otherwise.
T::Tensor rnd(const T::Shape& shape, uint64_t seed, double lo = -1.5, double hi = 1.5, DType dtype = DType::F64) {
  return T::uniform(T::Key(seed), shape, lo, hi, dtype);
}

}  // namespace

TEST(Grad, SpecStepFourBuiltIn) {
  const auto a = T::tensor({2, 2}, {1, 2, 3, 4});
  const auto b = T::tensor({2, 2}, {5, 6, 7, 8});
  Gr g;
  const Value x = g.input(a), y = g.input(b);
  const auto grads = g.backward(g.sum(g.mul(x, y)));
  EXPECT_EQ(grads.of(x).text(), "[[5, 6], [7, 8]]");
  EXPECT_EQ(grads.of(y).text(), "[[1, 2], [3, 4]]");
}

TEST(Grad, CustomOperation) {
  const auto a = T::tensor({2, 2}, {1, 2, 3, 4});
  const auto b = T::tensor({2, 2}, {5, 6, 7, 8});
  Gr h;
  const Value hx = h.input(a), hy = h.input(b);
  const Value xy = h.custom({hx, hy}, a.mul(b), [&](const T::Tensor& d) { return std::vector<T::Tensor>{d.mul(b), d.mul(a)}; });
  EXPECT_EQ(h.backward(h.sum(xy)).of(hy).text(), "[[1, 2], [3, 4]]");
}

TEST(Grad, CheckCatchesASmallError) {
  // A gradient 0.5% off fails the check (rtol 1e-3): the tolerances are torch's, which only an
  // f64 forward pass meets (an f32 one has differences errors of ~1e-7 / h).
  EXPECT_NONFATAL_FAILURE(checkGradients([](Gr& g, const std::vector<Value>& v) {
    const T::Tensor x = g.value(v[0]);
    return g.custom({v[0]}, x.mul(x), [x](const T::Tensor& d) {
      return std::vector<T::Tensor>{d.mul(x).mul(T::scalar(2.01, DType::F64))};
    });
  }, {rnd({1}, 29, 0.5, 1.5)}), "input 0 element 0");
}

TEST(Grad, ElementwiseWithBroadcasting) {
  const auto a = rnd({3, 4}, 1), b = rnd({4}, 2), c = rnd({3, 1}, 3, 0.5, 2.0);
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.add(v[0], v[1]); }, {a, b});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.sub(v[0], v[1]); }, {a, c});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.mul(v[0], v[1]); }, {a, b});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.div(v[0], v[1]); }, {a, c});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.pow(v[0], v[1]); }, {c, rnd({4}, 4)});
}

TEST(Grad, UnaryFunctions) {
  const auto x = rnd({2, 5}, 5), pos = rnd({2, 5}, 6, 0.3, 2.0);
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.neg(v[0]); }, {x});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.exp(v[0]); }, {x});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.log(v[0]); }, {pos});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.sqrt(v[0]); }, {pos});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.tanh(v[0]); }, {x});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.sigmoid(v[0]); }, {x});
  // relu has a kink at 0: its inputs lie in [-0.9, 0.8) and none within h of 0 (torch's advice
  // for gradcheck: inputs away from the points where the function is not differentiable).
  const auto shifted = pos.sub(T::scalar(1.2, DType::F64));
  for (double v : shifted.toDoubles()) ASSERT_GT(std::abs(v), 1e-3);
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.relu(v[0]); }, {shifted});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.silu(v[0]); }, {x});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.gelu(v[0]); }, {x});
}

TEST(Grad, MatmulBatchedAndTransposed) {
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.matmul(v[0], v[1]); }, {rnd({3, 4}, 7), rnd({4, 2}, 8)});
  // Broadcast batch axes, and a transposed (non-contiguous) operand.
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.matmul(v[0], v[1]); },
                 {rnd({2, 3, 4}, 9), rnd({2, 4}, 10).transpose(0, 1).contiguous().transpose(0, 1).transpose(0, 1)});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.matmul(v[0], g.permute(v[1], {1, 0})); },
                 {rnd({3, 4}, 11), rnd({5, 4}, 12)});
  // Non-contiguous inputs: a permuted view and a strided slice, read in place.
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.matmul(v[0], v[1]); },
                 {rnd({4, 3}, 25).transpose(0, 1), rnd({4, 6}, 26).slice(1, 0, 6, 3)});
  EXPECT_FALSE(rnd({4, 6}, 26).slice(1, 0, 6, 3).isContiguous());
}

TEST(Grad, Reductions) {
  const auto x = rnd({3, 4, 2}, 13);
  // max has kinks where two values tie: these 24 draws are all more than h apart, so no step
  // crosses a tie.
  std::vector<double> sorted = x.toDoubles();
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i) ASSERT_GT(sorted[i] - sorted[i - 1], 1e-4);
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.sum(v[0], {1}); }, {x});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.sum(v[0], {0, 2}, true); }, {x});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.mean(v[0], {2}); }, {x});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.max(v[0], {1}); }, {x});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.softmax(v[0], 1); }, {x});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.logSoftmax(v[0], -1); }, {x});
  // The same on a permuted (non-contiguous) input.
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.mean(g.softmax(v[0], 0), {1}); }, {x.permute({2, 0, 1})});
}

TEST(Grad, ShapesAndViews) {
  const auto x = rnd({4, 6}, 14);
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.reshape(v[0], {3, 8}); }, {x});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.permute(v[0], {1, 0}); }, {x});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.slice(v[0], 1, 5, 0, -2); }, {x});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.broadcast(v[0], {2, 4, 6}); }, {x});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.concat({v[0], v[1], v[0]}, 1); }, {x, rnd({4, 2}, 15)});
  // Non-contiguous inputs (a transposed view, a reversed strided slice).
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.tanh(v[0]); }, {rnd({6, 4}, 16).transpose(0, 1)});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.mul(v[0], g.sigmoid(v[1])); },
                 {rnd({6, 4}, 27).slice(0, 5, 0, -2), rnd({3, 4}, 28)});
}

TEST(Grad, RepeatedUseAccumulates) {
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.mul(g.add(v[0], v[0]), g.tanh(v[0])); }, {rnd({5}, 17)});
}

TEST(Grad, NetworkOperations) {
  const auto x = rnd({3, 5}, 18);
  const auto labels = T::tensor({3}, {4, 0, 2}, DType::I64);
  checkGradients([&](Gr& g, const std::vector<Value>& v) { return g.crossEntropy(v[0], labels); }, {x});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.layerNorm(v[0], v[1], v[2], 1e-5); },
                 {x, rnd({5}, 19), rnd({5}, 20)});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.rmsNorm(v[0], v[1], 1e-6); }, {x, rnd({5}, 21)});
  const auto ids = T::tensor({2, 2}, {3, 1, 3, 0}, DType::I32);
  checkGradients([&](Gr& g, const std::vector<Value>& v) { return g.embedding(v[0], ids); }, {rnd({4, 3}, 22)});
  checkGradients([](Gr& g, const std::vector<Value>& v) { return g.dropout(v[0], 0.3, T::Key(5)); }, {x});
}

TEST(Grad, DropoutIsDeterministicPerKey) {
  const auto x = T::ones({1000});
  Gr g;
  const auto a = g.value(g.dropout(g.input(x), 0.25, T::Key(9))).toFloats();
  const auto b = g.value(g.dropout(g.input(x), 0.25, T::Key(9))).toFloats();
  EXPECT_EQ(a, b);
  int kept = 0;
  for (float v : a) kept += v != 0.0f;
  EXPECT_NEAR(kept, 750, 60);
}

TEST(Grad, BackwardReleasesIntermediates) {
  // A 50-layer chain y = tanh(W y): the forward keeps each layer's activation; backward must not
  // add more than a few tensors of one layer on top (each step's saved values are released).
  const int64_t width = 256;
  const auto w = rnd({width, width}, 23, -0.05, 0.05, DType::F32);
  const int64_t layerBytes = width * 64 * 4;
  Gr g;
  Value y = g.input(rnd({width, 64}, 24, -1.5, 1.5, DType::F32));
  const Value wv = g.input(w);
  for (int layer = 0; layer < 50; ++layer) y = g.tanh(g.matmul(wv, y));
  const Value loss = g.sum(y);
  const uint64_t afterForward = T::Storage::liveBytes();
  T::Storage::resetPeak();
  const auto grads = g.backward(loss);
  const uint64_t peak = T::Storage::peakBytes();
  EXPECT_LT(peak - afterForward, static_cast<uint64_t>(8 * layerBytes + 3 * width * width * 4))
      << "backward held " << (peak - afterForward) / layerBytes << " layers' worth beyond the forward";
  EXPECT_EQ(grads.of(wv).shape(), (T::Shape{width, width}));
}


TEST(Grad, BadUse) {
  Gr g, other;
  const Value x = g.input(T::ones({2, 2}));
  expectError([&] { g.backward(x); }, {"one element"});
  const Value o = other.input(T::ones({1}));
  expectError([&] { g.add(x, o); }, {"another graph"});
  expectError([&] { g.backward(o); }, {"another graph"});
  const Value c = g.custom({x}, T::ones({2, 2}), [](const T::Tensor& d) { return std::vector<T::Tensor>{d, d}; });
  expectError([&] { g.backward(g.sum(c)); }, {"2 tensors for 1 inputs"});
  Gr h;
  const Value hx = h.input(T::ones({2, 2}));
  const Value bad = h.custom({hx}, T::ones({2, 2}), [](const T::Tensor&) { return std::vector<T::Tensor>{T::ones({3})}; });
  expectError([&] { h.backward(h.sum(bad)); }, {"shape [3]"});
  expectError([&] { Gr k; k.crossEntropy(k.input(T::ones({2, 3})), T::tensor({2}, {0, 3}, DType::I64)); }, {"labels[1] = 3"});
}
