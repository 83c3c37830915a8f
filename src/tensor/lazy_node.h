#pragma once
// The nodes of a Lazy expression and the type rules that build them.
#include <gizml/tensor.h>

namespace gizml::tensor {

struct Lazy::Node {
  enum class Kind : uint8_t { Leaf, Scalar, Unary, Binary, Where, Cast };
  Kind kind = Kind::Leaf;
  DType dtype = DType::F32;
  Shape shape;
  UnaryOp unaryOp = UnaryOp::Neg;
  BinaryOp binaryOp = BinaryOp::Add;
  double value = 0.0;  // Scalar
  bool weak = false;   // a bare number whose type follows the other operand
  Tensor tensor;       // Leaf
  std::vector<std::shared_ptr<const Node>> inputs;
};

/// The dtype an elementwise operation computes in and returns.
DType unaryResultType(UnaryOp op, DType x);
DType binaryComputeType(BinaryOp op, DType a, DType b);
DType binaryResultType(BinaryOp op, DType a, DType b);
bool isComparison(BinaryOp op);

}  // namespace gizml::tensor
