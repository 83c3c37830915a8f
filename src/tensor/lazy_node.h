#pragma once
// The nodes of a Lazy expression and the type rules that build them.
#include <gizml/tensor.h>

#include <unordered_set>
#include <vector>

namespace gizml::tensor {

// A product whose values are computed when the expression over it is evaluated. On the host it
// is computed a tile at a time: rows are its leading axes flattened, columns its last axis, and
// each tile of tileRows() rows by up to tileColumns() columns goes from computeTile straight into
// the expression's evaluation (lazy_eval.cpp), so the whole product is never stored. On a GPU the
// product's kernel may compute the whole expression in its store (storeTail).
struct Lazy::Product {
  virtual ~Product() = default;
  /// One of the product's operands: where it runs (the host or a GPU).
  virtual const Tensor& operand() const = 0;
  /// The whole product as a new F32 tensor: the path when its tail cannot run in its tiles.
  virtual Tensor compute() const = 0;
  /// Whether computeTile can run (on the host); otherwise the product is computed first.
  virtual bool tiles() const = 0;
  /// Rows computed together by one computeTile (a divisor of the product's row count).
  virtual int64_t tileRows() const = 0;
  /// The most columns a tile should have (the rest of a row goes to further tiles).
  virtual int64_t tileColumns() const = 0;
  /// Rows [group tileRows(), (group + 1) tileRows()) by columns [j0, j1) of the product into
  /// out, a row every j1 - j0 floats; the values equal compute()'s bit for bit.
  virtual void computeTile(int64_t group, int64_t j0, int64_t j1, float* out) const = 0;
  /// Whether the product computed the expression `root` (over this product, of its shape) in its
  /// store, into out (contiguous, root's shape and dtype, where the product runs); false: nothing
  /// was done.
  virtual bool storeTail(const Lazy::Node& root, const Tensor& out) const = 0;
};

struct Lazy::Node {
  enum class Kind : uint8_t { Leaf, Scalar, Unary, Binary, Where, Cast, Product };
  Kind kind = Kind::Leaf;
  DType dtype = DType::F32;
  Shape shape;
  UnaryOp unaryOp = UnaryOp::Neg;
  BinaryOp binaryOp = BinaryOp::Add;
  double value = 0.0;  // Scalar
  bool weak = false;   // a bare number whose type follows the other operand
  Tensor tensor;       // Leaf
  std::vector<std::shared_ptr<const Node>> inputs;
  std::shared_ptr<const Product> product;  // Product: an F32 leaf computed at evaluation
};

/// The dtype an elementwise operation computes in and returns.
DType unaryResultType(UnaryOp op, DType x);
DType binaryComputeType(BinaryOp op, DType a, DType b);
DType binaryResultType(BinaryOp op, DType a, DType b);
bool isComparison(BinaryOp op);

/// Calls visit(node) on each node of the expression once (a value read twice is one node),
/// without recursion (chains can be long).
template <class Visit>
void forEachNode(const Lazy::Node& root, Visit visit) {
  std::vector<const Lazy::Node*> pending = {&root};
  std::unordered_set<const Lazy::Node*> seen = {&root};
  while (!pending.empty()) {
    const Lazy::Node& node = *pending.back();
    pending.pop_back();
    visit(node);
    for (const auto& input : node.inputs)
      if (seen.insert(input.get()).second) pending.push_back(input.get());
  }
}

/// Whether the expression reads a deferred product.
bool readsProduct(const Lazy::Node& root);
/// The expression with each deferred product computed (Product::compute) and read as a leaf.
std::shared_ptr<const Lazy::Node> computeProducts(const std::shared_ptr<const Lazy::Node>& root);

}  // namespace gizml::tensor
