// The elementwise operations on tensors: each is a one-node Lazy expression, so eager and fused
// code share one implementation.
#include <gizml/tensor.h>

namespace gizml::tensor {

Tensor unary(UnaryOp op, const Tensor& x) { return lazy(x).unary(op).eval(); }
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) { return lazy(a).binary(op, lazy(b)).eval(); }
Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) {
  return where(lazy(c), lazy(a), lazy(b)).eval();
}

Tensor Tensor::neg() const { return unary(UnaryOp::Neg, *this); }
Tensor Tensor::abs() const { return unary(UnaryOp::Abs, *this); }
Tensor Tensor::exp() const { return unary(UnaryOp::Exp, *this); }
Tensor Tensor::log() const { return unary(UnaryOp::Log, *this); }
Tensor Tensor::sqrt() const { return unary(UnaryOp::Sqrt, *this); }
Tensor Tensor::rsqrt() const { return unary(UnaryOp::Rsqrt, *this); }
Tensor Tensor::sin() const { return unary(UnaryOp::Sin, *this); }
Tensor Tensor::cos() const { return unary(UnaryOp::Cos, *this); }
Tensor Tensor::tanh() const { return unary(UnaryOp::Tanh, *this); }
Tensor Tensor::sigmoid() const { return unary(UnaryOp::Sigmoid, *this); }
Tensor Tensor::relu() const { return unary(UnaryOp::Relu, *this); }
Tensor Tensor::silu() const { return unary(UnaryOp::Silu, *this); }
Tensor Tensor::gelu() const { return unary(UnaryOp::GeluErf, *this); }
Tensor Tensor::geluTanh() const { return unary(UnaryOp::GeluTanh, *this); }
Tensor Tensor::floor() const { return unary(UnaryOp::Floor, *this); }
Tensor Tensor::ceil() const { return unary(UnaryOp::Ceil, *this); }
Tensor Tensor::round() const { return unary(UnaryOp::Round, *this); }
Tensor Tensor::sign() const { return unary(UnaryOp::Sign, *this); }

Tensor Tensor::add(const Tensor& o) const { return binary(BinaryOp::Add, *this, o); }
Tensor Tensor::sub(const Tensor& o) const { return binary(BinaryOp::Sub, *this, o); }
Tensor Tensor::mul(const Tensor& o) const { return binary(BinaryOp::Mul, *this, o); }
Tensor Tensor::div(const Tensor& o) const { return binary(BinaryOp::Div, *this, o); }
Tensor Tensor::pow(const Tensor& o) const { return binary(BinaryOp::Pow, *this, o); }
Tensor Tensor::min(const Tensor& o) const { return binary(BinaryOp::Min, *this, o); }
Tensor Tensor::max(const Tensor& o) const { return binary(BinaryOp::Max, *this, o); }
Tensor Tensor::mod(const Tensor& o) const { return binary(BinaryOp::Mod, *this, o); }
Tensor Tensor::eq(const Tensor& o) const { return binary(BinaryOp::Eq, *this, o); }
Tensor Tensor::ne(const Tensor& o) const { return binary(BinaryOp::Ne, *this, o); }
Tensor Tensor::lt(const Tensor& o) const { return binary(BinaryOp::Lt, *this, o); }
Tensor Tensor::le(const Tensor& o) const { return binary(BinaryOp::Le, *this, o); }
Tensor Tensor::gt(const Tensor& o) const { return binary(BinaryOp::Gt, *this, o); }
Tensor Tensor::ge(const Tensor& o) const { return binary(BinaryOp::Ge, *this, o); }

}  // namespace gizml::tensor
