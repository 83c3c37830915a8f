// Reductions of the rows of contiguous [rows, n] data on the thread pool: f32 through the vector
// chunks of reduce_simd.cpp, f64 in the same order in double, i64 exact (wrapping).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/elementwise.h"
#include "cpu/reduce.h"

namespace gizml::cpu {
namespace {

// F64: the order of cpu/reduce.h (docs/tensor.md) in double, one row at a time: chunks of
// kReduceChunk values, 16 lanes in each (value i to lane i % 16, in increasing i, starting from 0,
// or 1 for Prod), the lanes combined pairwise (l += l + 8, + 4, + 2, + 1), the chunks in order.
// SumSquaredDiff adds (x - center) * (x - center). Max and Min are exact; NaN propagates.
double combineF64(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::Prod: return a * b;
    case ReduceOp::Max: return std::isnan(a) ? a : std::isnan(b) ? b : (a > b ? a : b);
    case ReduceOp::Min: return std::isnan(a) ? a : std::isnan(b) ? b : (a < b ? a : b);
    default: return a + b;
  }
}

double reduceChunkF64(ReduceOp op, const double* x, int64_t n, double center) {
  if (op == ReduceOp::Max || op == ReduceOp::Min) {
    double acc = x[0];
    for (int64_t i = 1; i < n; ++i) acc = combineF64(op, acc, x[i]);
    return acc;
  }
  double lanes[16];
  std::fill_n(lanes, 16, op == ReduceOp::Prod ? 1.0 : 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i] - center;
    double& lane = lanes[i % 16];
    lane = op == ReduceOp::Prod ? lane * x[i] : op == ReduceOp::SumSquaredDiff ? lane + d * d : lane + x[i];
  }
  const ReduceOp combine = op == ReduceOp::SumSquaredDiff ? ReduceOp::Sum : op;
  for (int width = 8; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] = combineF64(combine, lanes[l], lanes[l + width]);
  return lanes[0];
}

}  // namespace

// Reduces each f32 row. Few long rows split their chunks across threads; many rows split rows.
void reduceRowsF32(ReduceOp op, const float* x, int64_t rows, int64_t n, const float* centers, float* out) {
  if (rows >= core::threadCount() || n <= kReduceChunk) {
    core::parallelFor(rows, std::max<int64_t>(1, 65536 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) out[r] = reduceF32(op, x + r * n, n, centers ? centers[r] : 0.0f);
    });
    return;
  }
  const int64_t chunks = (n + kReduceChunk - 1) / kReduceChunk;
  std::vector<float> partial(static_cast<size_t>(chunks));
  const ReduceOp combine = op == ReduceOp::SumSquaredDiff ? ReduceOp::Sum : op;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * n;
    const float center = centers ? centers[r] : 0.0f;
    core::parallelFor(chunks, 16, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        const int64_t start = c * kReduceChunk;
        partial[c] = reduceChunkF32(op, row + start, std::min(kReduceChunk, n - start), center);
      }
    });
    float total = partial[0];
    for (int64_t c = 1; c < chunks; ++c) total = combineF32(combine, total, partial[c]);
    out[r] = total;
  }
}

double reduceF64(ReduceOp op, const double* x, int64_t n, double center) {
  double total = reduceChunkF64(op, x, std::min(n, kReduceChunk), center);
  const ReduceOp combine = op == ReduceOp::SumSquaredDiff ? ReduceOp::Sum : op;
  for (int64_t start = kReduceChunk; start < n; start += kReduceChunk)
    total = combineF64(combine, total, reduceChunkF64(op, x + start, std::min(kReduceChunk, n - start), center));
  return total;
}

void reduceRowsF64(ReduceOp op, const double* x, int64_t rows, int64_t n, const double* centers, double* out) {
  core::parallelFor(rows, std::max<int64_t>(1, 65536 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) out[r] = reduceF64(op, x + r * n, n, centers ? centers[r] : 0.0);
  });
}

void reduceRowsI64(ReduceOp op, const int64_t* x, int64_t rows, int64_t n, int64_t* out) {
  core::parallelFor(rows, std::max<int64_t>(1, 65536 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t* row = x + r * n;
      int64_t acc = op == ReduceOp::Prod ? 1 : op == ReduceOp::Max ? INT64_MIN : op == ReduceOp::Min ? INT64_MAX : 0;
      for (int64_t i = 0; i < n; ++i) {
        switch (op) {
          case ReduceOp::Prod: acc = wrapMul(acc, row[i]); break;
          case ReduceOp::Max: acc = std::max(acc, row[i]); break;
          case ReduceOp::Min: acc = std::min(acc, row[i]); break;
          default: acc = wrapAdd(acc, row[i]); break;
        }
      }
      out[r] = acc;
    }
  });
}

int64_t argmaxF32(const float* x, int64_t n) {
  int64_t at = -1;  // the first index of the largest value so far
  for (int64_t c0 = 0; c0 < n; c0 += kReduceChunk) {
    const int64_t c1 = std::min(n, c0 + kReduceChunk);
    const float m = reduceChunkF32(ReduceOp::Max, x + c0, c1 - c0, 0.0f);
    if (at >= 0 && !std::isnan(m) && !(m > x[at])) continue;
    for (int64_t j = c0; j < c1; ++j)
      if (!std::isnan(x[j]) && (at < 0 || x[j] > x[at])) at = j;
  }
  return std::max<int64_t>(at, 0);
}

}  // namespace gizml::cpu
