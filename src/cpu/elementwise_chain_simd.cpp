// Fused chains of f32 elementwise operations: kTile vectors stay in registers while every link
// is applied, so a chain costs one load and one store per element instead of one of each per
// operation. Vectors start at the same multiples of the lane count as in the per-operation
// loops, and a partial vector's unused lanes are zero before every link as there, so each lane
// (even of sin/cos, whose slow path is taken per vector) gets the same bits.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/elementwise_chain_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>

#include "cpu/elementwise-inl.h"
#include "cpu/elementwise_chain.h"

HWY_BEFORE_NAMESPACE();
namespace gizml::cpu {
namespace HWY_NAMESPACE {

using Form = ChainOp::Form;
constexpr int Code(Form form, int op) { return static_cast<int>(form) * 32 + op; }
constexpr int Code(Form form, UnaryOp op) { return Code(form, static_cast<int>(op)); }
constexpr int Code(Form form, BinaryOp op) { return Code(form, static_cast<int>(op)); }

// min/max against a constant that is not NaN: MinNaN/MaxNaN without the test of the constant
// (the same result, one comparison and one blend fewer per vector).
template <BinaryOp op, bool scalarFirst>
HWY_INLINE V MinMaxConstant(V v, V c) {
  const V m = op == BinaryOp::Min ? (scalarFirst ? hn::Min(c, v) : hn::Min(v, c))
                                  : (scalarFirst ? hn::Max(c, v) : hn::Max(v, c));
  return hn::IfThenElse(hn::IsNaN(v), v, m);
}

// Applies the links to the K vectors r; codes[j] is Code() of link j, checked by ChainF32 (so the
// switch needs no range test). operand(j, k) is vector k of operand array j; after each link
// `clear` zeroes the lanes past the end (the identity for full vectors).
template <size_t K, class Operand, class Clear>
HWY_INLINE void ApplyLinks(D d, const ChainOp* links, const uint16_t* codes, int64_t count, V (&r)[K],
                           const Operand& operand, const Clear& clear) {
  for (int64_t j = 0; j < count; ++j) {
    const ChainOp& link = links[j];
    switch (codes[j]) {
#define GIZML_EACH(expr)                               \
  _Pragma("GCC unroll 16") for (size_t k = 0; k < K; ++k) r[k] = clear(expr); \
  break;
#define GIZML_UNARY(name) \
  case Code(Form::Unary, UnaryOp::name): GIZML_EACH(Apply<UnaryOp::name>(d, r[k]))
      GIZML_UNARY(Neg) GIZML_UNARY(Abs) GIZML_UNARY(Exp) GIZML_UNARY(Log) GIZML_UNARY(Sqrt)
      GIZML_UNARY(Rsqrt) GIZML_UNARY(Sin) GIZML_UNARY(Cos) GIZML_UNARY(Tanh) GIZML_UNARY(Sigmoid)
      GIZML_UNARY(Relu) GIZML_UNARY(Silu) GIZML_UNARY(GeluTanh) GIZML_UNARY(Floor) GIZML_UNARY(Ceil)
      GIZML_UNARY(Round) GIZML_UNARY(Sign)
#undef GIZML_UNARY
#define GIZML_BINARY(name)                                                                                      \
  case Code(Form::Operand, BinaryOp::name): GIZML_EACH(Apply2<BinaryOp::name>(d, r[k], operand(link.operand, k))) \
  case Code(Form::OperandFirst, BinaryOp::name):                                                                \
    GIZML_EACH(Apply2<BinaryOp::name>(d, operand(link.operand, k), r[k]))                                       \
  case Code(Form::Self, BinaryOp::name): GIZML_EACH(Apply2<BinaryOp::name>(d, r[k], r[k]))                      \
  case Code(Form::Scalar, BinaryOp::name): {                                                                    \
    const V c = hn::Set(d, link.scalar);                                                                        \
    GIZML_EACH(Apply2<BinaryOp::name>(d, r[k], c))                                                              \
  }                                                                                                             \
  case Code(Form::ScalarFirst, BinaryOp::name): {                                                               \
    const V c = hn::Set(d, link.scalar);                                                                        \
    GIZML_EACH(Apply2<BinaryOp::name>(d, c, r[k]))                                                              \
  }
      GIZML_BINARY(Add) GIZML_BINARY(Sub) GIZML_BINARY(Mul) GIZML_BINARY(Div)
#undef GIZML_BINARY
#define GIZML_MINMAX(name)                                                                               \
  case Code(Form::Operand, BinaryOp::name): GIZML_EACH(Apply2<BinaryOp::name>(d, r[k], operand(link.operand, k))) \
  case Code(Form::OperandFirst, BinaryOp::name):                                                         \
    GIZML_EACH(Apply2<BinaryOp::name>(d, operand(link.operand, k), r[k]))                                \
  case Code(Form::Self, BinaryOp::name): GIZML_EACH(Apply2<BinaryOp::name>(d, r[k], r[k]))               \
  case Code(Form::Scalar, BinaryOp::name): {                                                             \
    const V c = hn::Set(d, link.scalar);                                                                 \
    if (std::isnan(link.scalar)) { GIZML_EACH(Apply2<BinaryOp::name>(d, r[k], c)) }                      \
    GIZML_EACH((MinMaxConstant<BinaryOp::name, false>(r[k], c)))                                         \
  }                                                                                                      \
  case Code(Form::ScalarFirst, BinaryOp::name): {                                                        \
    const V c = hn::Set(d, link.scalar);                                                                 \
    if (std::isnan(link.scalar)) { GIZML_EACH(Apply2<BinaryOp::name>(d, c, r[k])) }                      \
    GIZML_EACH((MinMaxConstant<BinaryOp::name, true>(r[k], c)))                                          \
  }
      GIZML_MINMAX(Min) GIZML_MINMAX(Max)
#undef GIZML_MINMAX
#undef GIZML_EACH
      default:
        __builtin_unreachable();
    }
  }
}

// Vectors held in registers at once: enough independent work to hide latencies, few enough to
// leave registers for constants (AVX2 has 16).
constexpr size_t kTile = 8;

template <size_t K>
HWY_INLINE void FullVectors(D d, const ChainOp* links, const uint16_t* codes, int64_t count, const float* x,
                            const float* const* operands, float* y, int64_t i, bool stream) {
  const size_t lanes = hn::Lanes(d);
  V r[K];
  for (size_t k = 0; k < K; ++k) r[k] = hn::LoadU(d, x + i + k * lanes);
  ApplyLinks(d, links, codes, count, r, [&](uint32_t j, size_t k) { return hn::LoadU(d, operands[j] + i + k * lanes); },
             [](V v) { return v; });
  if (stream) {
    for (size_t k = 0; k < K; ++k) hn::Stream(r[k], d, y + i + k * lanes);
  } else {
    for (size_t k = 0; k < K; ++k) hn::StoreU(r[k], d, y + i + k * lanes);
  }
}

void ChainF32(const ChainOp* links, int64_t count, const float* x, const float* const* operands,
              float* y, int64_t n, bool stream) {
  HWY_ASSERT(count <= kMaxChainLinks);
  uint16_t codes[kMaxChainLinks];
  for (int64_t j = 0; j < count; ++j) {
    const ChainOp& link = links[j];
    const bool unary = link.form == Form::Unary;
    HWY_ASSERT(link.form <= Form::Self && (unary ? chainsUnary(static_cast<UnaryOp>(link.op))
                                                 : chainsBinary(static_cast<BinaryOp>(link.op))));
    codes[j] = static_cast<uint16_t>(Code(link.form, link.op));
  }
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  stream = stream && reinterpret_cast<uintptr_t>(y) % (lanes * sizeof(float)) == 0;  // Stream needs alignment
  int64_t i = 0;
  for (; i + static_cast<int64_t>(kTile) * lanes <= n; i += static_cast<int64_t>(kTile) * lanes)
    FullVectors<kTile>(d, links, codes, count, x, operands, y, i, stream);
  for (; i + lanes <= n; i += lanes) FullVectors<1>(d, links, codes, count, x, operands, y, i, stream);
  if (i == n) return;
  // The last partial vector through padded copies.
  const size_t rest = static_cast<size_t>(n - i);
  const auto valid = hn::FirstN(d, rest);
  HWY_ALIGN float padded[hn::MaxLanes(d)] = {};
  auto loadPadded = [&](const float* p) {
    std::copy(p + i, p + n, padded);
    return hn::Load(d, padded);
  };
  V r[1] = {loadPadded(x)};
  ApplyLinks(d, links, codes, count, r, [&](uint32_t j, size_t) { return loadPadded(operands[j]); },
             [&](V v) { return hn::IfThenElseZero(valid, v); });
  hn::Store(r[0], d, padded);
  std::copy(padded, padded + rest, y + i);
}

}  // namespace HWY_NAMESPACE
}  // namespace gizml::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gizml::cpu {
HWY_EXPORT(ChainF32);

bool chainsUnary(tensor::UnaryOp op) {
  // GeluErf has no vector code; Not (the last) gives Bool.
  return op < tensor::UnaryOp::Not && op != tensor::UnaryOp::GeluErf;
}

bool chainsBinary(tensor::BinaryOp op) {
  using tensor::BinaryOp;
  return op == BinaryOp::Add || op == BinaryOp::Sub || op == BinaryOp::Mul || op == BinaryOp::Div ||
         op == BinaryOp::Min || op == BinaryOp::Max;
}

void chainF32(const ChainOp* links, int64_t count, const float* x, const float* const* operands, float* y,
              int64_t n, bool stream) {
  HWY_DYNAMIC_DISPATCH(ChainF32)(links, count, x, operands, y, n, stream);
}

void streamFence() { hwy::FlushStream(); }
}  // namespace gizml::cpu
#endif
