// The elementwise operations on one SIMD vector of f32, shared by the per-operation loops
// (elementwise_simd.cpp) and the fused chains (elementwise_chain_simd.cpp). Included once per
// Highway target, hence the toggling guard instead of #pragma once.
#if defined(GIZML_CPU_ELEMENTWISE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GIZML_CPU_ELEMENTWISE_INL_H_
#undef GIZML_CPU_ELEMENTWISE_INL_H_
#else
#define GIZML_CPU_ELEMENTWISE_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <cmath>

#include <gizml/ops.h>

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

}  // namespace HWY_NAMESPACE
}  // namespace gizml::cpu
HWY_AFTER_NAMESPACE();

#endif  // GIZML_CPU_ELEMENTWISE_INL_H_
