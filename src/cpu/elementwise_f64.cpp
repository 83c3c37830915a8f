// F64 elementwise kernels: plain loops over libm in double (the compiler vectorises the simple
// ones). The same rules as the f32 kernels (docs/tensor.md, "Computation"): NaN-propagating
// min/max, NumPy's float mod, round half to even, sign(0) = 0, relu keeps NaN.
#include <gizml/error.h>

#include <cmath>

#include "cpu/elementwise.h"

namespace gizml::cpu {
namespace {
using tensor::BinaryOp;
using tensor::UnaryOp;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

double unary(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Abs: return std::fabs(x);
    case UnaryOp::Exp: return std::exp(x);
    case UnaryOp::Log: return std::log(x);
    case UnaryOp::Sqrt: return std::sqrt(x);
    case UnaryOp::Rsqrt: return 1.0 / std::sqrt(x);
    case UnaryOp::Sin: return std::sin(x);
    case UnaryOp::Cos: return std::cos(x);
    case UnaryOp::Tanh: return std::tanh(x);
    case UnaryOp::Sigmoid: return sigmoid(x);
    case UnaryOp::Relu: return x < 0.0 ? 0.0 : x;
    case UnaryOp::Silu: return x * sigmoid(x);
    case UnaryOp::GeluErf: return 0.5 * x * std::erfc(x * -0.70710678118654752);  // 1 + erf(z) = erfc(-z)
    case UnaryOp::GeluTanh: {  // 0.5 x (1 + tanh(u)) as x sigmoid(2u), as the f32 kernel
      const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
      return x * sigmoid(2.0 * u);
    }
    case UnaryOp::Floor: return std::floor(x);
    case UnaryOp::Ceil: return std::ceil(x);
    case UnaryOp::Round: return std::nearbyint(x);  // ties to even in the default rounding mode
    case UnaryOp::Sign: return x > 0.0 ? 1.0 : x < 0.0 ? -1.0 : std::isnan(x) ? x : 0.0;
    case UnaryOp::Not: return x == 0.0 ? 1.0 : 0.0;
  }
  return x;
}

// NumPy's float remainder: the sign of the divisor.
double floorMod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0.0 && ((r < 0.0) != (b < 0.0))) r += b;
  if (r == 0.0) r = std::copysign(0.0, b);
  return r;
}

double minNaN(double a, double b) { return std::isnan(a) ? a : std::isnan(b) ? b : (b < a ? b : a); }
double maxNaN(double a, double b) { return std::isnan(a) ? a : std::isnan(b) ? b : (b > a ? b : a); }

template <class F>
void each(const double* a, const double* b, double* y, int64_t n, F&& f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], b[i]);
}

}  // namespace

void unaryF64(UnaryOp op, const double* x, double* y, int64_t n) {
  switch (op) {  // the common cheap ones as their own loops, so they vectorise
    case UnaryOp::Neg: for (int64_t i = 0; i < n; ++i) y[i] = -x[i]; return;
    case UnaryOp::Abs: for (int64_t i = 0; i < n; ++i) y[i] = std::fabs(x[i]); return;
    case UnaryOp::Sqrt: for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]); return;
    default: for (int64_t i = 0; i < n; ++i) y[i] = unary(op, x[i]); return;
  }
}

void binaryF64(BinaryOp op, const double* a, const double* b, double* y, int64_t n) {
  switch (op) {
    case BinaryOp::Add: return each(a, b, y, n, [](double p, double q) { return p + q; });
    case BinaryOp::Sub: return each(a, b, y, n, [](double p, double q) { return p - q; });
    case BinaryOp::Mul: return each(a, b, y, n, [](double p, double q) { return p * q; });
    case BinaryOp::Div: return each(a, b, y, n, [](double p, double q) { return p / q; });
    case BinaryOp::Pow: return each(a, b, y, n, [](double p, double q) { return std::pow(p, q); });
    case BinaryOp::Min: return each(a, b, y, n, minNaN);
    case BinaryOp::Max: return each(a, b, y, n, maxNaN);
    case BinaryOp::Mod: return each(a, b, y, n, floorMod);
    default: throw Error(std::string("binaryF64: ") + tensor::opName(op) + " gives a Bool (compareF64)");
  }
}

void compareF64(BinaryOp op, const double* a, const double* b, float* y, int64_t n) {
  auto run = [&](auto&& f) {
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], b[i]) ? 1.0f : 0.0f;
  };
  switch (op) {
    case BinaryOp::Eq: return run([](double p, double q) { return p == q; });
    case BinaryOp::Ne: return run([](double p, double q) { return p != q; });
    case BinaryOp::Lt: return run([](double p, double q) { return p < q; });
    case BinaryOp::Le: return run([](double p, double q) { return p <= q; });
    case BinaryOp::Gt: return run([](double p, double q) { return p > q; });
    case BinaryOp::Ge: return run([](double p, double q) { return p >= q; });
    case BinaryOp::And: return run([](double p, double q) { return p != 0.0 && q != 0.0; });
    case BinaryOp::Or: return run([](double p, double q) { return p != 0.0 || q != 0.0; });
    default: throw Error(std::string("compareF64: ") + tensor::opName(op) + " is not a comparison");
  }
}

void whereF64(const float* c, const double* a, const double* b, double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = c[i] != 0.0f ? a[i] : b[i];
}

}  // namespace gizml::cpu
