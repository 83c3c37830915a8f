#pragma once
// gizml::grad: a Graph records operations on its values; backward gives the gradient of a
// one-element result against every input. Spec: Step 4 of the guide.
#include <gizml/tensor.h>

#include <functional>
#include <memory>
#include <vector>

namespace gizml::grad {

using tensor::Axes;
using tensor::Shape;
using tensor::Tensor;

struct GraphState;

/// A value of a graph: a handle (the graph and the value's index in it).
struct Value {
  GraphState* graph = nullptr;
  int64_t id = -1;
};

/// The gradients of one backward pass, by input.
class Grads {
 public:
  /// The gradient of the result against input x (zeros if the result does not depend on x).
  const Tensor& of(const Value& x) const;

 private:
  friend class Graph;
  const GraphState* graph_ = nullptr;
  std::vector<Tensor> grads_;  // by value id; defined for inputs
};

/// The gradients of a custom operation's inputs from the gradient of its output.
using GradFn = std::function<std::vector<Tensor>(const Tensor& dy)>;

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;

  /// A value whose gradient backward reports.
  Value input(const Tensor& t);
  /// A value without a gradient (labels, masks, fixed weights).
  Value constant(const Tensor& t);
  /// The forward value of v.
  const Tensor& value(const Value& v) const;

  Value add(Value a, Value b);
  Value sub(Value a, Value b);
  Value mul(Value a, Value b);
  Value div(Value a, Value b);
  Value pow(Value a, Value b);
  Value neg(Value x);
  Value exp(Value x);
  Value log(Value x);
  Value sqrt(Value x);
  Value tanh(Value x);
  Value sigmoid(Value x);
  Value relu(Value x);
  Value silu(Value x);
  Value gelu(Value x);  // erf form
  Value matmul(Value a, Value b);
  Value sum(Value x, const Axes& axes = {}, bool keepdim = false);
  Value mean(Value x, const Axes& axes = {}, bool keepdim = false);
  /// max over axes; ties share the gradient equally (as torch.amax).
  Value max(Value x, const Axes& axes = {}, bool keepdim = false);
  Value reshape(Value x, const Shape& shape);
  Value permute(Value x, const Axes& axes);
  Value slice(Value x, int64_t axis, int64_t start, int64_t stop, int64_t step = 1);
  Value broadcast(Value x, const Shape& shape);
  Value concat(const std::vector<Value>& xs, int64_t axis);
  Value softmax(Value x, int64_t axis = -1);
  Value logSoftmax(Value x, int64_t axis = -1);
  /// Mean softmax cross-entropy of logits [rows, classes] against integer labels [rows].
  Value crossEntropy(Value logits, const Tensor& labels);
  /// Layer norm over the last axis: (x - mean) / sqrt(var + eps) * weight + bias.
  Value layerNorm(Value x, Value weight, Value bias, double eps);
  /// x / sqrt(mean(x^2) + eps) * weight over the last axis.
  Value rmsNorm(Value x, Value weight, double eps);
  /// Rows of table [vocab, dim] for integer ids (any shape): [..., dim].
  Value embedding(Value table, const Tensor& ids);
  /// Zeroes each element with probability p (uniform draws of key), scales the rest by 1/(1-p).
  Value dropout(Value x, double p, const tensor::Key& key);
  /// An operation of your own: `output` is its forward value (computed by any kernel, a tile
  /// program included); gradFn gives the gradient of each input from the output's gradient.
  Value custom(const std::vector<Value>& inputs, const Tensor& output, GradFn gradFn);

  /// The gradients of y (one element) against every input. Intermediate values are released as
  /// soon as no later step of the pass needs them.
  Grads backward(Value y);

 private:
  std::unique_ptr<GraphState> state_;
};

Graph graph();

/// Adam (Kingma & Ba) with bias correction; `step` updates each parameter from its gradient.
class Adam {
 public:
  explicit Adam(double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8);
  /// params[i] -= lr * mhat / (sqrt(vhat) + eps), elementwise in f32 (fused, one pass each).
  void step(std::vector<Tensor>& params, const std::vector<Tensor>& grads);

 private:
  double lr_, beta1_, beta2_, eps_;
  int64_t t_ = 0;
  std::vector<Tensor> m_, v_;
};

}  // namespace gizml::grad

namespace gizml {
namespace G = grad;  // the spec's `G.` prefix: G::graph()
}
