#pragma once
// Argument checks and host access shared by the rows part of gizml::netops (rows_*.cpp).
#include <gizml/netops_rows.h>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace gizml::netops::rows {

using tensor::Shape;

/// Values per INT8 group of the ConvRot rows (the 256-point Hadamard rotation, one scale each).
inline constexpr int64_t kInt8Group = 256;

/// v (n values, n a power of 4) times the regular Hadamard matrix of n, H4 (x) ... (x) H4 / sqrt(n)
/// with H4 = [[1,1,1,-1],[1,1,-1,1],[1,-1,1,1],[-1,1,1,1]] (symmetric and orthogonal, so it is
/// its own inverse): radix-4 stages over the index's base-4 digits, lowest first, each halving
/// (exact), in one fixed order of additions. The rows' rotation with n = 256; ComfyUI's INT8
/// weights are rotated over groups of 16, 64 or 256.
void regularHadamard(float* v, int64_t n);

/// An Error unless every named operand is in host memory: these functions have only their host
/// paths on tensors so far, and a GPU operand must not be read as host memory.
void requireHost(const char* fn, std::initializer_list<std::pair<const char*, const Tensor*>> operands);
/// An Error naming `name` unless t has this shape.
void requireShape(const char* fn, const char* name, const Tensor& t, const Shape& shape);
/// An Error naming `name` unless t has `rank` axes.
void requireRank(const char* fn, const char* name, const Tensor& t, int64_t rank);
/// t's values as contiguous F32 (a copy when t is another float dtype or a view); an Error for
/// integer dtypes.
Tensor f32Values(const char* fn, const char* name, const Tensor& t);
/// An Error unless `out` can be written in place: contiguous, of this shape, F32 (or BF16 when
/// allowed).
void requireOutput(const char* fn, const char* name, const Tensor& out, const Shape& shape, bool allowBf16);
/// Writes F32 values into out (F32 or BF16 contiguous, host), rounding to nearest even for BF16.
void storeValues(const Tensor& out, const float* values);
/// The row indexes of map ([rows] F32, whole numbers in [0, limit)), or an Error naming the first
/// bad one.
std::vector<int64_t> rowMap(const char* fn, const Tensor& map, int64_t rows, int64_t limit);

/// 1 / sqrt(mean of squares + eps) of n values, the squares added in order in F32: the RMS
/// norms' factor (modulated, gated, pixel and head norms).
float inverseRms(const float* x, int64_t n, int64_t step, float eps);

}  // namespace gizml::netops::rows
