// Elementwise f32 kernels written once with Highway and compiled for each x86 target; the
// dispatcher picks the best one the CPU supports at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/elementwise_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <algorithm>
#include <cmath>

#include "cpu/elementwise.h"
#include "cpu/elementwise-inl.h"

HWY_BEFORE_NAMESPACE();
namespace gizml::cpu {
namespace HWY_NAMESPACE {

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
