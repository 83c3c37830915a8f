// The CUDA C++ text of elementwise operations (see cuda_expr.h); docs/tensor.md gives the semantics.
#include "tensor/gpu/cuda_expr.h"

namespace gizml::gpuops {
namespace {

using gizml::DType;
using gizml::tensor::BinaryOp;
using gizml::tensor::UnaryOp;

gizml::Error noIntegerForm(const char* op) {
  return gizml::Error(std::string("gpu codegen: ") + op + " has no integer form");
}

const char* compareOp(BinaryOp op) {
  switch (op) {
    case BinaryOp::Eq: return "==";
    case BinaryOp::Ne: return "!=";
    case BinaryOp::Lt: return "<";
    case BinaryOp::Le: return "<=";
    case BinaryOp::Gt: return ">";
    case BinaryOp::Ge: return ">=";
    default: return nullptr;
  }
}

}  // namespace

const std::string& elementwiseMathSource() {
  static const std::string source =
#include "tensor/gpu/kernels/elementwise_math.cu.inc"
      ;
  return source;
}

std::string roundF32(DType t, const std::string& x) {
  switch (t) {
    case DType::F16: return "gz_round_f16(" + x + ")";
    case DType::BF16: return "gz_round_bf16(" + x + ")";
    case DType::Bool: return "gz_round_bool(" + x + ")";
    default: return x;
  }
}

std::string unaryF32(UnaryOp op, const std::string& x) {
  switch (op) {
    case UnaryOp::Neg: return "-" + x;
    case UnaryOp::Abs: return "fabsf(" + x + ")";
    case UnaryOp::Exp: return "expf(" + x + ")";
    case UnaryOp::Log: return "logf(" + x + ")";
    case UnaryOp::Sqrt: return "sqrtf(" + x + ")";
    case UnaryOp::Rsqrt: return "1.0f / sqrtf(" + x + ")";
    case UnaryOp::Sin: return "sinf(" + x + ")";
    case UnaryOp::Cos: return "cosf(" + x + ")";
    case UnaryOp::Tanh: return "tanhf(" + x + ")";
    case UnaryOp::Sigmoid: return "gz_sigmoid(" + x + ")";
    case UnaryOp::Relu: return "(" + x + " < 0.0f ? 0.0f : " + x + ")";
    case UnaryOp::Silu: return x + " * gz_sigmoid(" + x + ")";
    case UnaryOp::GeluErf: return "gz_gelu_erf(" + x + ")";
    case UnaryOp::GeluTanh: return "gz_gelu_tanh(" + x + ")";
    // The result keeps x's sign (ceil(-0.5) is -0), as on the CPU.
    case UnaryOp::Floor: return "copysignf(floorf(" + x + "), " + x + ")";
    case UnaryOp::Ceil: return "copysignf(ceilf(" + x + "), " + x + ")";
    case UnaryOp::Round: return "copysignf(rintf(" + x + "), " + x + ")";
    case UnaryOp::Sign: return "gz_sign(" + x + ")";
    case UnaryOp::Not: return "(" + x + " == 0.0f ? 1.0f : 0.0f)";
  }
  return x;
}

std::string binaryF32(BinaryOp op, const std::string& a, const std::string& b) {
  switch (op) {
    case BinaryOp::Add: return a + " + " + b;
    case BinaryOp::Sub: return a + " - " + b;
    case BinaryOp::Mul: return a + " * " + b;
    case BinaryOp::Div: return a + " / " + b;
    case BinaryOp::Pow: return "powf(" + a + ", " + b + ")";
    case BinaryOp::Min: return "gz_min(" + a + ", " + b + ")";
    case BinaryOp::Max: return "gz_max(" + a + ", " + b + ")";
    case BinaryOp::Mod: return "gz_fmod(" + a + ", " + b + ")";
    case BinaryOp::And: return "((" + a + " != 0.0f && " + b + " != 0.0f) ? 1.0f : 0.0f)";
    case BinaryOp::Or: return "((" + a + " != 0.0f || " + b + " != 0.0f) ? 1.0f : 0.0f)";
    default: return "(" + a + " " + compareOp(op) + " " + b + " ? 1.0f : 0.0f)";
  }
}

std::string select(const std::string& cond, const std::string& a, const std::string& b) {
  return "(" + cond + " != 0.0f ? " + a + " : " + b + ")";
}

std::string wrapI64(DType t, const std::string& x) {
  switch (t) {
    case DType::I8: return "(i64)(i8)(" + x + ")";
    case DType::U8: return "(i64)(u8)(" + x + ")";
    case DType::I32: return "(i64)(int)(" + x + ")";
    default: return x;
  }
}

std::string unaryI64(UnaryOp op, const std::string& x) {
  switch (op) {
    case UnaryOp::Neg: return "gz_wsub(0, " + x + ")";
    case UnaryOp::Abs: return "(" + x + " < 0 ? gz_wsub(0, " + x + ") : " + x + ")";
    case UnaryOp::Relu: return "(" + x + " < 0 ? (i64)0 : " + x + ")";
    case UnaryOp::Sign: return "(i64)((" + x + " > 0) - (" + x + " < 0))";
    case UnaryOp::Floor: case UnaryOp::Ceil: case UnaryOp::Round: return x;
    default: throw noIntegerForm(gizml::tensor::opName(op));
  }
}

std::string binaryI64(BinaryOp op, const std::string& a, const std::string& b) {
  switch (op) {
    case BinaryOp::Add: return "gz_wadd(" + a + ", " + b + ")";
    case BinaryOp::Sub: return "gz_wsub(" + a + ", " + b + ")";
    case BinaryOp::Mul: return "gz_wmul(" + a + ", " + b + ")";
    case BinaryOp::Pow: return "gz_ipow(" + a + ", " + b + ")";
    case BinaryOp::Min: return "(" + a + " < " + b + " ? " + a + " : " + b + ")";
    case BinaryOp::Max: return "(" + a + " > " + b + " ? " + a + " : " + b + ")";
    case BinaryOp::Mod: return "gz_imod(" + a + ", " + b + ")";
    default: throw noIntegerForm(gizml::tensor::opName(op));
  }
}

std::string compareI64(BinaryOp op, const std::string& a, const std::string& b) {
  if (op == BinaryOp::And) return "((" + a + " && " + b + ") ? 1.0f : 0.0f)";
  if (op == BinaryOp::Or) return "((" + a + " || " + b + ") ? 1.0f : 0.0f)";
  return "(" + a + " " + compareOp(op) + " " + b + " ? 1.0f : 0.0f)";
}

std::string castF32ToInt(DType t, const std::string& x) {
  switch (t) {
    case DType::I8: return "gz_f32_to_int(" + x + ", -128.0, 127.0, -128, 127)";
    case DType::U8: return "gz_f32_to_int(" + x + ", 0.0, 255.0, 0, 255)";
    case DType::I32: return "gz_f32_to_int(" + x + ", -2147483648.0, 2147483647.0, -2147483647 - 1, 2147483647)";
    default:
      return "gz_f32_to_int(" + x + ", -9223372036854775808.0, 9223372036854775808.0, (i64)0x8000000000000000ull, "
             "(i64)0x7fffffffffffffffull)";
  }
}

// Through an f32 rounded to odd for F16/BF16, so that the rounding to the dtype is the only one.
std::string castIntToF32(DType t, const std::string& x) {
  if (t == DType::F16 || t == DType::BF16) return roundF32(t, "gz_i64_to_f32_odd(" + x + ")");
  return roundF32(t, "(float)(" + x + ")");
}

}  // namespace gizml::gpuops
