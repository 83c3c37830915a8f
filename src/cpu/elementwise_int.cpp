// Integer elementwise kernels (plain loops; the compiler vectorises what it can).
#include <gizml/error.h>

#include "cpu/elementwise.h"

namespace gizml::cpu {
namespace {
using tensor::BinaryOp;
using tensor::UnaryOp;

int64_t intPow(int64_t base, int64_t exponent) {
  if (exponent < 0) return base == 1 ? 1 : base == -1 ? (exponent % 2 ? -1 : 1) : 0;
  int64_t result = 1;
  while (exponent) {
    if (exponent & 1) result = wrapMul(result, base);
    base = wrapMul(base, base);
    exponent >>= 1;
  }
  return result;
}

// NumPy's integer remainder: the sign of the divisor; x % 0 is 0.
int64_t floorMod(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return 0;  // avoids INT64_MIN % -1
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

bool compare(BinaryOp op, int64_t a, int64_t b) {
  switch (op) {
    case BinaryOp::Eq: return a == b;
    case BinaryOp::Ne: return a != b;
    case BinaryOp::Lt: return a < b;
    case BinaryOp::Le: return a <= b;
    case BinaryOp::Gt: return a > b;
    case BinaryOp::Ge: return a >= b;
    case BinaryOp::And: return a && b;
    case BinaryOp::Or: return a || b;
    default: throw Error(std::string("compareI64: ") + tensor::opName(op) + " is not a comparison");
  }
}

}  // namespace

void unaryI64(UnaryOp op, const int64_t* x, int64_t* y, int64_t n) {
  switch (op) {
    case UnaryOp::Neg: for (int64_t i = 0; i < n; ++i) y[i] = wrapSub(0, x[i]); return;
    case UnaryOp::Abs: for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0 ? wrapSub(0, x[i]) : x[i]; return;
    case UnaryOp::Relu: for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0 ? 0 : x[i]; return;
    case UnaryOp::Sign: for (int64_t i = 0; i < n; ++i) y[i] = (x[i] > 0) - (x[i] < 0); return;
    case UnaryOp::Floor: case UnaryOp::Ceil: case UnaryOp::Round:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i];
      return;
    default:
      throw Error(std::string("unaryI64: ") + tensor::opName(op) + " computes in floats");
  }
}

void binaryI64(BinaryOp op, const int64_t* a, const int64_t* b, int64_t* y, int64_t n) {
  switch (op) {
    case BinaryOp::Add: for (int64_t i = 0; i < n; ++i) y[i] = wrapAdd(a[i], b[i]); return;
    case BinaryOp::Sub: for (int64_t i = 0; i < n; ++i) y[i] = wrapSub(a[i], b[i]); return;
    case BinaryOp::Mul: for (int64_t i = 0; i < n; ++i) y[i] = wrapMul(a[i], b[i]); return;
    case BinaryOp::Pow: for (int64_t i = 0; i < n; ++i) y[i] = intPow(a[i], b[i]); return;
    case BinaryOp::Min: for (int64_t i = 0; i < n; ++i) y[i] = a[i] < b[i] ? a[i] : b[i]; return;
    case BinaryOp::Max: for (int64_t i = 0; i < n; ++i) y[i] = a[i] > b[i] ? a[i] : b[i]; return;
    case BinaryOp::Mod: for (int64_t i = 0; i < n; ++i) y[i] = floorMod(a[i], b[i]); return;
    default:
      throw Error(std::string("binaryI64: ") + tensor::opName(op) + " has no integer form");
  }
}

void compareI64(BinaryOp op, const int64_t* a, const int64_t* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = compare(op, a[i], b[i]) ? 1.0f : 0.0f;
}

void whereI64(const float* c, const int64_t* a, const int64_t* b, int64_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = c[i] != 0.0f ? a[i] : b[i];
}

}  // namespace gizml::cpu
