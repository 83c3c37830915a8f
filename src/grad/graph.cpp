// Graph bookkeeping and the backward pass.
#include "grad/graph_state.h"

namespace gizml::grad {

const Node& GraphState::node(const Value& v, const char* what) const {
  check(v.graph == this, std::string(what) + ": the value belongs to another graph");
  check(v.id >= 0 && v.id < static_cast<int64_t>(nodes.size()),
        std::string(what) + ": value " + std::to_string(v.id) + " does not exist");
  return nodes[static_cast<size_t>(v.id)];
}

Value GraphState::add(Tensor value, std::vector<Value> inputs, Backward backward, const char* what) {
  Node n;
  n.value = std::move(value);
  for (const Value& v : inputs) {
    n.needsGrad = node(v, what).needsGrad || n.needsGrad;
    n.inputs.push_back(v.id);
  }
  if (n.needsGrad) n.backward = std::move(backward);
  nodes.push_back(std::move(n));
  return Value{this, static_cast<int64_t>(nodes.size()) - 1};
}

Tensor unbroadcast(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int64_t lead = g.ndim() - static_cast<int64_t>(shape.size());
  Axes axes;
  for (int64_t i = 0; i < g.ndim(); ++i)
    if (i < lead || (shape[static_cast<size_t>(i - lead)] == 1 && g.shape()[i] != 1)) axes.push_back(i);
  return (axes.empty() ? g : g.sum(axes, true)).reshape(shape);
}

Tensor placedLike(const Tensor& t, const Tensor& like) {
  return like.onGpu() ? t.on(gizhw::gpu::Gpu(like.storage()->gpu())) : t.host();
}

const Tensor& Grads::of(const Value& x) const {
  check(x.graph == graph_, "grads.of: the value belongs to another graph");
  check(x.id >= 0 && x.id < static_cast<int64_t>(grads_.size()), "grads.of: value " + std::to_string(x.id) + " does not exist");
  check(graph_->nodes[static_cast<size_t>(x.id)].isInput, "grads.of: value " + std::to_string(x.id) + " is not an input");
  return grads_[static_cast<size_t>(x.id)];
}

Graph::Graph() : state_(std::make_unique<GraphState>()) {}
Graph::~Graph() = default;
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;
Graph graph() { return Graph(); }

Value Graph::input(const Tensor& t) {
  Node n;
  n.value = t;
  n.needsGrad = n.isInput = true;
  state_->nodes.push_back(std::move(n));
  return Value{state_.get(), static_cast<int64_t>(state_->nodes.size()) - 1};
}

Value Graph::constant(const Tensor& t) { return state_->add(t, {}, nullptr, "constant"); }

const Tensor& Graph::value(const Value& v) const { return state_->node(v, "value").value; }

Grads Graph::backward(Value y) {
  const Node& result = state_->node(y, "backward");
  check(result.value.numel() == 1, "backward: the result has shape " + tensor::shapeText(result.value.shape()) +
                                       "; it must hold one element");
  auto& nodes = state_->nodes;
  std::vector<std::optional<Tensor>> pending(nodes.size());
  pending[static_cast<size_t>(y.id)] = placedLike(tensor::ones(result.value.shape(), result.value.dtype()), result.value);
  // Nodes are recorded in the order they were computed, so walking back visits each node after
  // every node that reads it.
  for (int64_t id = y.id; id >= 0; --id) {
    Node& n = nodes[static_cast<size_t>(id)];
    if (!pending[id] || !n.backward) continue;
    const std::vector<std::optional<Tensor>> gs = n.backward(*pending[id]);
    check(gs.size() == n.inputs.size(), "backward: an operation gave " + std::to_string(gs.size()) +
                                            " gradients for " + std::to_string(n.inputs.size()) + " inputs");
    for (size_t k = 0; k < gs.size(); ++k) {
      const int64_t input = n.inputs[k];
      if (!gs[k] || !nodes[static_cast<size_t>(input)].needsGrad) continue;
      auto& slot = pending[static_cast<size_t>(input)];
      slot = slot ? slot->add(*gs[k]) : *gs[k];
    }
    // This step is done: its saved tensors and its gradient are no longer needed.
    n.backward = nullptr;
    pending[id].reset();
  }
  Grads grads;
  grads.graph_ = state_.get();
  grads.grads_.resize(nodes.size());
  for (size_t id = 0; id < nodes.size(); ++id)
    if (nodes[id].isInput)
      grads.grads_[id] = pending[id] ? *pending[id]
                                      : placedLike(tensor::zeros(nodes[id].value.shape(), nodes[id].value.dtype()), nodes[id].value);
  return grads;
}

}  // namespace gizml::grad
