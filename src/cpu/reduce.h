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
/// The same order in double (the lanes and chunks of an f32 run; Max and Min exact).
double reduceF64(ReduceOp op, const double* x, int64_t n, double center = 0.0);

/// out[r] = the reduction of row r of contiguous x [rows, n] (n > 0), about centers[r] for
/// SumSquaredDiff (centers may be null: 0); rows run on the thread pool, and few long f32 rows
/// split their chunks across it. Every row gets the bits of reduceF32 / reduceF64.
void reduceRowsF32(ReduceOp op, const float* x, int64_t rows, int64_t n, const float* centers, float* out);
void reduceRowsF64(ReduceOp op, const double* x, int64_t rows, int64_t n, const double* centers, double* out);
/// The same for i64 rows (n >= 0): exact wrapping sums and products in index order, Max, Min.
void reduceRowsI64(ReduceOp op, const int64_t* x, int64_t rows, int64_t n, int64_t* out);

/// The first index of x's largest value (n > 0), NaN passed over (all NaN: 0): each chunk's
/// maximum by reduceChunkF32 first, values one by one only in a chunk that may hold a larger one.
/// A language model's step takes the argmax of a 151,936-value row, where one compare-and-move
/// chain took about 100 us.
int64_t argmaxF32(const float* x, int64_t n);

}  // namespace gizml::cpu
