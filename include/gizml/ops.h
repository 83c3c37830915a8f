#pragma once
// The elementwise operations, named below the tensor layer: Lazy builds expressions of them
// (gizml/tensor.h) and the CPU kernels (src/cpu) and the GPU's generated kernels compute them.
#include <cstdint>

namespace gizml::tensor {

enum class UnaryOp : uint8_t {
  Neg, Abs, Exp, Log, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Relu, Silu, GeluErf, GeluTanh,
  Floor, Ceil, Round, Sign, Not
};
enum class BinaryOp : uint8_t {
  Add, Sub, Mul, Div, Pow, Min, Max, Mod, Eq, Ne, Lt, Le, Gt, Ge, And, Or
};
const char* opName(UnaryOp op);
const char* opName(BinaryOp op);

}  // namespace gizml::tensor
