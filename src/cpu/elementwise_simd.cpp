// Elementwise f32 kernels written once with Highway and compiled for each x86 target; the
// dispatcher picks the best one the CPU supports at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/elementwise_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>

#include "cpu/elementwise.h"

HWY_BEFORE_NAMESPACE();
namespace gizml::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using tensor::BinaryOp;
using tensor::UnaryOp;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// exp that saturates: Highway's Exp is valid on [-87.3, 88.7]; outside it we give 0 and inf.
HWY_INLINE V SafeExp(D d, V x) {
  const V lo = hn::Set(d, -87.33654f), hi = hn::Set(d, 88.72283f);
  V e = hn::Exp(d, hn::Min(hn::Max(x, lo), hi));
  e = hn::IfThenElse(hn::Lt(x, lo), hn::Zero(d), e);
  e = hn::IfThenElse(hn::Gt(x, hi), hn::Set(d, INFINITY), e);
  return hn::IfThenElse(hn::IsNaN(x), x, e);
}

HWY_INLINE V Sigmoid(D d, V x) {
  const V one = hn::Set(d, 1.0f);
  return hn::Div(one, hn::Add(one, SafeExp(d, hn::Neg(x))));
}

// 0.5 x (1 + tanh(u)) written as x sigmoid(2u): the same function without the cancellation of
// 1 + tanh(u) for negative x (which lost every digit below x = -5).
HWY_INLINE V GeluTanh(D d, V x) {
  const V k = hn::Set(d, 0.7978845608028654f), c = hn::Set(d, 0.044715f);
  const V inner = hn::Mul(k, hn::MulAdd(hn::Mul(c, x), hn::Mul(x, x), x));
  return hn::Mul(x, Sigmoid(d, hn::Add(inner, inner)));
}

// NaN-propagating min and max, as NumPy's minimum and maximum.
HWY_INLINE V MinNaN(V a, V b) {
  return hn::IfThenElse(hn::IsNaN(a), a, hn::IfThenElse(hn::IsNaN(b), b, hn::Min(a, b)));
}
HWY_INLINE V MaxNaN(V a, V b) {
  return hn::IfThenElse(hn::IsNaN(a), a, hn::IfThenElse(hn::IsNaN(b), b, hn::Max(a, b)));
}

// Highway's sin and cos hold on [-39000, 39000]; a vector with a lane outside goes to libm.
template <class F>
HWY_INLINE V TrigOrScalar(D d, V x, V fast, F scalar) {
  if (HWY_LIKELY(hn::AllTrue(d, hn::Le(hn::Abs(x), hn::Set(d, 39000.0f))))) return fast;
  HWY_ALIGN float values[hn::MaxLanes(d)];
  hn::Store(x, d, values);
  for (size_t i = 0; i < hn::Lanes(d); ++i) values[i] = scalar(values[i]);
  return hn::Load(d, values);
}

template <UnaryOp op>
HWY_INLINE V Apply(D d, V x) {
  const V zero = hn::Zero(d), one = hn::Set(d, 1.0f);
  switch (op) {
    case UnaryOp::Neg: return hn::Neg(x);
    case UnaryOp::Abs: return hn::Abs(x);
    case UnaryOp::Exp: return SafeExp(d, x);
    case UnaryOp::Log: {
      // Highway's Log covers positive normal inputs: subnormals are scaled by 2^24 first (and
      // 24 ln 2 taken off); the edges follow IEEE (log 0 = -inf, log of a negative = NaN).
      const V tiny = hn::Set(d, 1.17549435e-38f);
      const auto subnormal = hn::Lt(x, tiny);
      const V scaled = hn::IfThenElse(subnormal, hn::Mul(x, hn::Set(d, 16777216.0f)), x);
      V y = hn::Log(d, hn::Max(scaled, tiny));
      y = hn::IfThenElse(subnormal, hn::Sub(y, hn::Set(d, 16.635532333438687f)), y);
      y = hn::IfThenElse(hn::Lt(x, zero), hn::Set(d, NAN), y);
      y = hn::IfThenElse(hn::Eq(x, zero), hn::Set(d, -INFINITY), y);
      y = hn::IfThenElse(hn::Eq(x, hn::Set(d, INFINITY)), x, y);
      return hn::IfThenElse(hn::IsNaN(x), x, y);
    }
    case UnaryOp::Sqrt: return hn::Sqrt(x);
    case UnaryOp::Rsqrt: return hn::Div(one, hn::Sqrt(x));
    case UnaryOp::Sin: return TrigOrScalar(d, x, hn::Sin(d, x), [](float v) { return std::sin(v); });
    case UnaryOp::Cos: return TrigOrScalar(d, x, hn::Cos(d, x), [](float v) { return std::cos(v); });
    case UnaryOp::Tanh: return hn::Tanh(d, x);
    case UnaryOp::Sigmoid: return Sigmoid(d, x);
    case UnaryOp::Relu: return hn::IfThenElse(hn::Lt(x, zero), zero, x);
    case UnaryOp::Silu: return hn::Mul(x, Sigmoid(d, x));
    case UnaryOp::GeluTanh: return GeluTanh(d, x);
    // The result has x's sign (ceil(-0.5) = -0): Highway's SSSE3 and emulated targets drop it.
    case UnaryOp::Floor: return hn::CopySign(hn::Floor(x), x);
    case UnaryOp::Ceil: return hn::CopySign(hn::Ceil(x), x);
    case UnaryOp::Round: return hn::CopySign(hn::Round(x), x);  // ties to even, as numpy.round
    case UnaryOp::Sign:  // +0 for both zeros, NaN for NaN (as numpy.sign)
      return hn::IfThenElse(hn::Gt(x, zero), one,
                            hn::IfThenElse(hn::Lt(x, zero), hn::Neg(one), hn::IfThenElse(hn::IsNaN(x), x, zero)));
    case UnaryOp::Not: return hn::IfThenElse(hn::Eq(x, zero), one, zero);
    case UnaryOp::GeluErf: break;  // scalar below
  }
  return x;
}

template <UnaryOp op>
void UnaryLoop(const float* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t n) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
#pragma GCC unroll 4
  for (; i + lanes <= n; i += lanes) hn::StoreU(Apply<op>(d, hn::LoadU(d, x + i)), d, y + i);
  if (i < n) {  // the tail through a padded copy
    HWY_ALIGN float in[hn::MaxLanes(d)] = {}, out[hn::MaxLanes(d)];
    std::copy(x + i, x + n, in);
    hn::Store(Apply<op>(d, hn::Load(d, in)), d, out);
    std::copy(out, out + (n - i), y + i);
  }
}

void UnaryF32(int opCode, const float* HWY_RESTRICT x, float* HWY_RESTRICT y, int64_t n) {
  switch (static_cast<UnaryOp>(opCode)) {
#define GIZML_UNARY(name) case UnaryOp::name: return UnaryLoop<UnaryOp::name>(x, y, n);
    GIZML_UNARY(Neg) GIZML_UNARY(Abs) GIZML_UNARY(Exp) GIZML_UNARY(Log) GIZML_UNARY(Sqrt)
    GIZML_UNARY(Rsqrt) GIZML_UNARY(Sin) GIZML_UNARY(Cos) GIZML_UNARY(Tanh) GIZML_UNARY(Sigmoid)
    GIZML_UNARY(Relu) GIZML_UNARY(Silu) GIZML_UNARY(GeluTanh) GIZML_UNARY(Floor) GIZML_UNARY(Ceil)
    GIZML_UNARY(Round) GIZML_UNARY(Sign) GIZML_UNARY(Not)
#undef GIZML_UNARY
    case UnaryOp::GeluErf:
      // No vector erf in Highway: libm's, as 1 + erf(z) = erfc(-z) (no cancellation for negative
      // x), in double so that rounding z costs nothing where erfc amplifies it (~x^2 ulps).
      for (int64_t i = 0; i < n; ++i)
        y[i] = static_cast<float>(0.5 * x[i] * std::erfc(x[i] * -0.70710678118654752));
      return;
  }
}

template <BinaryOp op>
HWY_INLINE V Apply2(D d, V a, V b) {
  const V zero = hn::Zero(d), one = hn::Set(d, 1.0f);
  switch (op) {
    case BinaryOp::Add: return hn::Add(a, b);
    case BinaryOp::Sub: return hn::Sub(a, b);
    case BinaryOp::Mul: return hn::Mul(a, b);
    case BinaryOp::Div: return hn::Div(a, b);
    case BinaryOp::Min: return MinNaN(a, b);
    case BinaryOp::Max: return MaxNaN(a, b);
    case BinaryOp::Eq: return hn::IfThenElse(hn::Eq(a, b), one, zero);
    case BinaryOp::Ne: return hn::IfThenElse(hn::Eq(a, b), zero, one);
    case BinaryOp::Lt: return hn::IfThenElse(hn::Lt(a, b), one, zero);
    case BinaryOp::Le: return hn::IfThenElse(hn::Le(a, b), one, zero);
    case BinaryOp::Gt: return hn::IfThenElse(hn::Gt(a, b), one, zero);
    case BinaryOp::Ge: return hn::IfThenElse(hn::Ge(a, b), one, zero);
    case BinaryOp::And: return hn::IfThenElse(hn::And(hn::Ne(a, zero), hn::Ne(b, zero)), one, zero);
    case BinaryOp::Or: return hn::IfThenElse(hn::Or(hn::Ne(a, zero), hn::Ne(b, zero)), one, zero);
    case BinaryOp::Pow: case BinaryOp::Mod: break;  // scalar below
  }
  return a;
}

// NumPy's float remainder: the sign of the divisor.
float FloorMod(float a, float b) {
  float r = std::fmod(a, b);
  if (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) r += b;
  if (r == 0.0f) r = std::copysign(0.0f, b);
  return r;
}

template <BinaryOp op>
void BinaryLoop(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, float* HWY_RESTRICT y, int64_t n) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
#pragma GCC unroll 4
  for (; i + lanes <= n; i += lanes) hn::StoreU(Apply2<op>(d, hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, y + i);
  if (i < n) {  // the tail through padded copies
    HWY_ALIGN float inA[hn::MaxLanes(d)] = {}, inB[hn::MaxLanes(d)] = {}, out[hn::MaxLanes(d)];
    std::copy(a + i, a + n, inA);
    std::copy(b + i, b + n, inB);
    hn::Store(Apply2<op>(d, hn::Load(d, inA), hn::Load(d, inB)), d, out);
    std::copy(out, out + (n - i), y + i);
  }
}

void BinaryF32(int opCode, const float* HWY_RESTRICT a, const float* HWY_RESTRICT b,
               float* HWY_RESTRICT y, int64_t n) {
  switch (static_cast<BinaryOp>(opCode)) {
#define GIZML_BINARY(name) case BinaryOp::name: return BinaryLoop<BinaryOp::name>(a, b, y, n);
    GIZML_BINARY(Add) GIZML_BINARY(Sub) GIZML_BINARY(Mul) GIZML_BINARY(Div) GIZML_BINARY(Min)
    GIZML_BINARY(Max) GIZML_BINARY(Eq) GIZML_BINARY(Ne) GIZML_BINARY(Lt) GIZML_BINARY(Le)
    GIZML_BINARY(Gt) GIZML_BINARY(Ge) GIZML_BINARY(And) GIZML_BINARY(Or)
#undef GIZML_BINARY
    case BinaryOp::Pow:
      for (int64_t i = 0; i < n; ++i) y[i] = std::pow(a[i], b[i]);
      return;
    case BinaryOp::Mod:
      for (int64_t i = 0; i < n; ++i) y[i] = FloorMod(a[i], b[i]);
      return;
  }
}

template <BinaryOp op, bool scalarFirst>
void BinaryScalarLoop(const float* HWY_RESTRICT a, float s, float* HWY_RESTRICT y, int64_t n) {
  const D d;
  const V c = hn::Set(d, s);
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  auto apply = [&](V v) { return scalarFirst ? Apply2<op>(d, c, v) : Apply2<op>(d, v, c); };
  int64_t i = 0;
#pragma GCC unroll 4
  for (; i + lanes <= n; i += lanes) hn::StoreU(apply(hn::LoadU(d, a + i)), d, y + i);
  if (i < n) {  // the tail through a padded copy
    HWY_ALIGN float in[hn::MaxLanes(d)] = {}, out[hn::MaxLanes(d)];
    std::copy(a + i, a + n, in);
    hn::Store(apply(hn::Load(d, in)), d, out);
    std::copy(out, out + (n - i), y + i);
  }
}

template <bool scalarFirst>
void BinaryScalar(BinaryOp op, const float* HWY_RESTRICT a, float s, float* HWY_RESTRICT y, int64_t n) {
  switch (op) {
#define GIZML_BINARY(name) case BinaryOp::name: return BinaryScalarLoop<BinaryOp::name, scalarFirst>(a, s, y, n);
    GIZML_BINARY(Add) GIZML_BINARY(Sub) GIZML_BINARY(Mul) GIZML_BINARY(Div) GIZML_BINARY(Min)
    GIZML_BINARY(Max) GIZML_BINARY(Eq) GIZML_BINARY(Ne) GIZML_BINARY(Lt) GIZML_BINARY(Le)
    GIZML_BINARY(Gt) GIZML_BINARY(Ge) GIZML_BINARY(And) GIZML_BINARY(Or)
#undef GIZML_BINARY
    case BinaryOp::Pow:
      for (int64_t i = 0; i < n; ++i) y[i] = scalarFirst ? std::pow(s, a[i]) : std::pow(a[i], s);
      return;
    case BinaryOp::Mod:
      for (int64_t i = 0; i < n; ++i) y[i] = scalarFirst ? FloorMod(s, a[i]) : FloorMod(a[i], s);
      return;
  }
}

void BinaryScalarF32(int opCode, const float* HWY_RESTRICT a, float s, float* HWY_RESTRICT y, int64_t n,
                     bool scalarFirst) {
  const auto op = static_cast<BinaryOp>(opCode);
  if (scalarFirst) BinaryScalar<true>(op, a, s, y, n);
  else BinaryScalar<false>(op, a, s, y, n);
}

void WhereF32(const float* HWY_RESTRICT c, const float* HWY_RESTRICT a, const float* HWY_RESTRICT b,
              float* HWY_RESTRICT y, int64_t n) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto m = hn::Ne(hn::LoadU(d, c + i), hn::Zero(d));
    hn::StoreU(hn::IfThenElse(m, hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, y + i);
  }
  for (; i < n; ++i) y[i] = c[i] != 0.0f ? a[i] : b[i];
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace gizml::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gizml::cpu {
HWY_EXPORT(UnaryF32);
HWY_EXPORT(BinaryF32);
HWY_EXPORT(WhereF32);
HWY_EXPORT(BinaryScalarF32);
HWY_EXPORT(TargetName);

void unaryF32(tensor::UnaryOp op, const float* x, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(UnaryF32)(static_cast<int>(op), x, y, n);
}
void binaryF32(tensor::BinaryOp op, const float* a, const float* b, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(BinaryF32)(static_cast<int>(op), a, b, y, n);
}
void binaryScalarF32(tensor::BinaryOp op, const float* a, float s, float* y, int64_t n, bool scalarFirst) {
  HWY_DYNAMIC_DISPATCH(BinaryScalarF32)(static_cast<int>(op), a, s, y, n, scalarFirst);
}
void whereF32(const float* condition, const float* a, const float* b, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(WhereF32)(condition, a, b, y, n);
}
const char* simdTarget() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }
}  // namespace gizml::cpu
#endif
