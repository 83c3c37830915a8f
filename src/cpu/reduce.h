#pragma once
// Reductions of contiguous f32 runs in the order of docs/tensor.md ("Order of additions"):
// chunks of kReduceChunk values; within a chunk 16 lanes (value i goes to lane i % 16, added in
// increasing i), the lanes combined pairwise (l += l + 8, then + 4, + 2, + 1); the chunk results
// added in chunk order. Any vector width gives the same bits.
#include <cmath>
#include <cstdint>

namespace gizml::cpu {

inline constexpr int64_t kReduceChunk = 4096;

enum class ReduceOp : uint8_t { Sum, Prod, Max, Min, SumSquaredDiff };

/// Combines two partial results of op (Max and Min propagate NaN; SumSquaredDiff adds).
inline float combineF32(ReduceOp op, float a, float b) {
  switch (op) {
    case ReduceOp::Prod: return a * b;
    case ReduceOp::Max: return std::isnan(a) ? a : std::isnan(b) ? b : (a > b ? a : b);
    case ReduceOp::Min: return std::isnan(a) ? a : std::isnan(b) ? b : (a < b ? a : b);
    default: return a + b;
  }
}

/// The reduction of one chunk (n <= kReduceChunk); SumSquaredDiff adds (x - center)^2.
float reduceChunkF32(ReduceOp op, const float* x, int64_t n, float center);
/// The reduction of a whole run: its chunks combined in order (Max/Min propagate NaN).
float reduceF32(ReduceOp op, const float* x, int64_t n, float center = 0.0f);

}  // namespace gizml::cpu
