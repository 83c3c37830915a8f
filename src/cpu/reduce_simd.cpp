// Chunk reductions with Highway: 16 lanes of partial results whatever the vector width.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/reduce_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <algorithm>
#include <cmath>

#include "cpu/reduce.h"

HWY_BEFORE_NAMESPACE();
namespace gizml::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

float Identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::Prod: return 1.0f;
    case ReduceOp::Max: return -INFINITY;
    case ReduceOp::Min: return INFINITY;
    default: return 0.0f;
  }
}

template <int kVectors>
float Chunk(ReduceOp op, const float* HWY_RESTRICT x, int64_t n, float center) {
  const D d;
  constexpr int kLanes = 16;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  V acc[kVectors];
  for (auto& a : acc) a = hn::Set(d, Identity(op));
  V nanSeen = hn::Zero(d);
  const V c = hn::Set(d, center);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int v = 0; v < kVectors; ++v) {
      const V value = hn::LoadU(d, x + i + v * lanes);
      switch (op) {
        case ReduceOp::Sum: acc[v] = hn::Add(acc[v], value); break;
        case ReduceOp::Prod: acc[v] = hn::Mul(acc[v], value); break;
        case ReduceOp::Max: acc[v] = hn::Max(acc[v], value); nanSeen = hn::Or(nanSeen, hn::VecFromMask(d, hn::IsNaN(value))); break;
        case ReduceOp::Min: acc[v] = hn::Min(acc[v], value); nanSeen = hn::Or(nanSeen, hn::VecFromMask(d, hn::IsNaN(value))); break;
        case ReduceOp::SumSquaredDiff: {
          const V diff = hn::Sub(value, c);
          acc[v] = hn::Add(acc[v], hn::Mul(diff, diff));
          break;
        }
      }
    }
  }
  HWY_ALIGN float partial[kLanes];
  for (int v = 0; v < kVectors; ++v) hn::Store(acc[v], d, partial + v * lanes);
  for (int64_t j = 0; i < n; ++i, ++j) {
    const float value = x[i];
    partial[j] = op == ReduceOp::SumSquaredDiff ? partial[j] + (value - center) * (value - center)
                                                : combineF32(op, partial[j], value);
  }
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l)
      partial[l] = combineF32(op == ReduceOp::SumSquaredDiff ? ReduceOp::Sum : op, partial[l], partial[l + width]);
  if ((op == ReduceOp::Max || op == ReduceOp::Min) && !hn::AllFalse(d, hn::MaskFromVec(nanSeen))) return NAN;
  return partial[0];
}

float ReduceChunk(int opCode, const float* HWY_RESTRICT x, int64_t n, float center) {
  const auto op = static_cast<ReduceOp>(opCode);
  switch (hn::Lanes(D())) {
    case 16: return Chunk<1>(op, x, n, center);
    case 8: return Chunk<2>(op, x, n, center);
    case 4: return Chunk<4>(op, x, n, center);
    default: return Chunk<16>(op, x, n, center);  // one lane per vector
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace gizml::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gizml::cpu {
HWY_EXPORT(ReduceChunk);

float reduceChunkF32(ReduceOp op, const float* x, int64_t n, float center) {
  return HWY_DYNAMIC_DISPATCH(ReduceChunk)(static_cast<int>(op), x, n, center);
}

float reduceF32(ReduceOp op, const float* x, int64_t n, float center) {
  float total = reduceChunkF32(op, x, std::min(n, kReduceChunk), center);
  const ReduceOp combineOp = op == ReduceOp::SumSquaredDiff ? ReduceOp::Sum : op;
  for (int64_t start = kReduceChunk; start < n; start += kReduceChunk) {
    const float chunk = reduceChunkF32(op, x + start, std::min(n - start, kReduceChunk), center);
    total = combineF32(combineOp, total, chunk);
  }
  return total;
}
}  // namespace gizml::cpu
#endif
