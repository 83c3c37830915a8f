#pragma once
// The record of a Graph: one node per value, each with the closure that maps the gradient of
// its value to the gradients of its inputs (the closure holds the tensors it saved).
#include <gizml/grad.h>

#include <optional>

namespace gizml::grad {

/// Gradients of a node's inputs, in the order of its inputs (nullopt: none for that input).
using Backward = std::function<std::vector<std::optional<Tensor>>(const Tensor& dy)>;

struct Node {
  Tensor value;
  std::vector<int64_t> inputs;
  Backward backward;       // empty for inputs and constants
  bool needsGrad = false;  // an input, or computed from one
  bool isInput = false;
};

struct GraphState {
  std::vector<Node> nodes;

  const Node& node(const Value& v, const char* what) const;
  /// Adds a node computed from `inputs`; backward is dropped when no input needs a gradient.
  Value add(Tensor value, std::vector<Value> inputs, Backward backward, const char* what);
};

/// g summed over the axes along which `shape` was broadcast to g's shape, then shaped as shape.
Tensor unbroadcast(const Tensor& g, const Shape& shape);
/// t where `like` is: on like's GPU, or in host memory (gradients live where their values do).
Tensor placedLike(const Tensor& t, const Tensor& like);

}  // namespace gizml::grad
