// Building Lazy expressions: broadcasting, weak scalars and type promotion happen here, so that
// evaluation only has to run the nodes.
#include <cmath>
#include <unordered_map>

#include "tensor/lazy_node.h"

namespace gizml::tensor {
namespace {

using NodePtr = std::shared_ptr<const Lazy::Node>;

bool floatOnly(UnaryOp op) {
  switch (op) {
    case UnaryOp::Exp: case UnaryOp::Log: case UnaryOp::Sqrt: case UnaryOp::Rsqrt:
    case UnaryOp::Sin: case UnaryOp::Cos: case UnaryOp::Tanh: case UnaryOp::Sigmoid:
    case UnaryOp::Silu: case UnaryOp::GeluErf: case UnaryOp::GeluTanh:
      return true;
    default:
      return false;
  }
}

NodePtr makeScalar(double value, DType dtype, bool weak) {
  auto n = std::make_shared<Lazy::Node>();
  n->kind = Lazy::Node::Kind::Scalar;
  n->dtype = dtype;
  n->value = value;
  n->weak = weak;
  return n;
}

NodePtr castNode(const NodePtr& x, DType dtype) {
  if (x->dtype == dtype) return x;
  if (x->kind == Lazy::Node::Kind::Scalar) return makeScalar(x->value, dtype, false);
  auto n = std::make_shared<Lazy::Node>();
  n->kind = Lazy::Node::Kind::Cast;
  n->dtype = dtype;
  n->shape = x->shape;
  n->inputs = {x};
  return n;
}

// A weak scalar takes the other operand's type; a fraction next to an integer gives F32, and a
// whole number next to a bool gives I64 (NumPy 2's rule for Python scalars, NEP 50).
NodePtr resolveWeak(const NodePtr& scalar, DType other) {
  const bool whole = std::floor(scalar->value) == scalar->value;
  DType t = other;
  if (!isFloat(other)) t = !whole ? DType::F32 : other == DType::Bool ? DType::I64 : other;
  return makeScalar(scalar->value, t, false);
}

}  // namespace

bool isComparison(BinaryOp op) {
  return op == BinaryOp::Eq || op == BinaryOp::Ne || op == BinaryOp::Lt || op == BinaryOp::Le ||
         op == BinaryOp::Gt || op == BinaryOp::Ge;
}

DType unaryResultType(UnaryOp op, DType x) {
  if (op == UnaryOp::Not) return DType::Bool;
  if (floatOnly(op) && !isFloat(x)) return DType::F32;
  if (x == DType::Bool) return DType::I64;  // arithmetic on bools counts them as 0 and 1
  return x;
}

DType binaryComputeType(BinaryOp op, DType a, DType b) {
  if (op == BinaryOp::And || op == BinaryOp::Or) return DType::Bool;
  DType t = promoteTypes(a, b);
  if (t == DType::Bool && !isComparison(op)) t = DType::I64;
  if (op == BinaryOp::Div && !isFloat(t)) t = DType::F32;  // true division
  return t;
}

DType binaryResultType(BinaryOp op, DType a, DType b) {
  if (isComparison(op)) return DType::Bool;
  return binaryComputeType(op, a, b);
}

Lazy::Lazy(const Tensor& t) {
  auto n = std::make_shared<Node>();
  n->kind = Node::Kind::Leaf;
  n->dtype = t.dtype();
  n->shape = t.shape();
  n->tensor = t;
  node_ = n;
}

Lazy Lazy::deferred(std::shared_ptr<const Product> product, const Shape& shape) {
  check(product != nullptr, "Lazy::deferred: no product");
  auto n = std::make_shared<Node>();
  n->kind = Node::Kind::Product;
  n->dtype = DType::F32;
  n->shape = shape;
  n->product = std::move(product);
  return Lazy(n);
}

bool readsProduct(const Lazy::Node& root) {
  bool found = false;
  forEachNode(root, [&](const Lazy::Node& node) { found = found || node.kind == Lazy::Node::Kind::Product; });
  return found;
}

namespace {

NodePtr withProductsComputed(const NodePtr& node, std::unordered_map<const Lazy::Node*, NodePtr>& done) {
  if (auto it = done.find(node.get()); it != done.end()) return it->second;
  NodePtr result = node;
  if (node->kind == Lazy::Node::Kind::Product) {
    result = Lazy(node->product->compute()).node();
  } else if (!node->inputs.empty()) {
    auto copy = std::make_shared<Lazy::Node>(*node);
    for (auto& input : copy->inputs) input = withProductsComputed(input, done);
    result = copy;
  }
  done[node.get()] = result;
  return result;
}

}  // namespace

NodePtr computeProducts(const NodePtr& root) {
  std::unordered_map<const Lazy::Node*, NodePtr> done;
  return withProductsComputed(root, done);
}

Lazy::Lazy(double value) : node_(makeScalar(value, DType::F32, true)) {}

Lazy lazy(const Tensor& t) { return Lazy(t); }

DType Lazy::dtype() const { return node_->dtype; }
const Shape& Lazy::shape() const { return node_->shape; }

Lazy Lazy::cast(DType dtype) const { return Lazy(castNode(node_, dtype)); }

Lazy Lazy::unary(UnaryOp op) const {
  const DType result = unaryResultType(op, dtype());
  auto n = std::make_shared<Node>();
  n->kind = Node::Kind::Unary;
  n->unaryOp = op;
  n->dtype = result;
  n->shape = shape();
  // The operation computes in its result type (Not reads any type as a truth value).
  n->inputs = {op == UnaryOp::Not ? castNode(node_, DType::Bool) : castNode(node_, result)};
  return Lazy(n);
}

Lazy Lazy::binary(BinaryOp op, const Lazy& o) const {
  NodePtr a = node_, b = o.node_;
  if (a->weak && !b->weak) a = resolveWeak(a, b->dtype);
  if (b->weak && !a->weak) b = resolveWeak(b, a->dtype);
  const DType compute = binaryComputeType(op, a->dtype, b->dtype);
  auto n = std::make_shared<Node>();
  n->kind = Node::Kind::Binary;
  n->binaryOp = op;
  n->dtype = binaryResultType(op, a->dtype, b->dtype);
  n->shape = broadcastShapes(a->shape, b->shape);
  n->inputs = {castNode(a, compute), castNode(b, compute)};
  return Lazy(n);
}

Lazy where(const Lazy& condition, const Lazy& a, const Lazy& b) {
  using NodePtr = std::shared_ptr<const Lazy::Node>;
  NodePtr x = a.node_, y = b.node_;
  if (x->weak && !y->weak) x = resolveWeak(x, y->dtype);
  if (y->weak && !x->weak) y = resolveWeak(y, x->dtype);
  const DType t = promoteTypes(x->dtype, y->dtype);
  auto n = std::make_shared<Lazy::Node>();
  n->kind = Lazy::Node::Kind::Where;
  n->dtype = t;
  n->shape = broadcastShapes(condition.shape(), broadcastShapes(x->shape, y->shape));
  n->inputs = {castNode(condition.node_, DType::Bool), castNode(x, t), castNode(y, t)};
  return Lazy(n);
}

}  // namespace gizml::tensor
