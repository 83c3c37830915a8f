#pragma once
// The GPU paths of netops' norms, ConvRot INT8 rows and argmax (src/netops/kernels/netops_norm.cu.inc).
// The callers (affine.cpp, group_norm.cpp, rows_norm.cpp, rows_int8.cpp, tensor_methods.cpp)
// check shapes first; these check dtypes and layouts of the GPU operands and queue the kernels
// on their GPU's stream (no copy to the host, no wait, except argmax, whose answer is a host vector).
#include <gizml/netops_rows.h>

#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

#include "tensor/gpu/tensor_ops.h"

namespace gizml::netops::normgpu {

/// The slices of each group whose sums groupNorm adds on separate workgroups (f32 within one,
/// f64 across): the spec's GROUP_SLICES.
inline constexpr int64_t kGroupSlices = 32;

/// A GPU operand the kernels read as F32 or BF16: itself when contiguous F32 or BF16, else (F16,
/// views) a contiguous copy made on the GPU. An Error naming it unless a float type other than F64.
Tensor rowsOperand(const char* fn, const char* name, const Tensor& t);
/// An Error unless a GPU output is contiguous and of one of these dtypes.
void requireGpuOutput(const char* fn, const char* name, const Tensor& t, std::initializer_list<DType> dtypes);

/// The modulated norm's operands on a GPU, checked (shapes by modulatedRows' checks).
struct Modulated {
  Tensor x, w, shift, scale, map;
  double eps;
  bool centered;
};

/// modulatedNorm's rows into y (F32 or BF16 contiguous, x's shape).
void modulatedInto(const char* fn, const Modulated& m, const Tensor& y);
/// int8Rows of modulatedNorm's rows (modulated) or of x's rows into q (I8, I4 or F32) and s ([rows, 1]
/// F32); y (optional) also gets modulatedNorm's values.
void int8RowsInto(const char* fn, const std::optional<Modulated>& m, const Tensor& x, const std::optional<Tensor>& y,
                  const Tensor& q, const Tensor& s, int64_t bits);
/// x (F32, in place) += (y's row over its RMS times w) times gate's row map[r].
void gatedNormAdd(const char* fn, const Tensor& x, const Tensor& y, const Tensor& w, const Tensor& gate,
                  const Tensor& map, double eps);
/// PixelNorm of x ([frames, c, pixels], BF16 or F32) into out (contiguous, x's dtype; may be x).
void pixelNorm(const char* fn, const Tensor& x, double eps, bool act, const Tensor& out);
/// groupNorm's F32 result of x ([c, ...] F32 contiguous on a GPU), w and b ([c] F32).
Tensor groupNorm(const Tensor& x, int64_t groups, const Tensor& w, const Tensor& b, double eps, bool act);
/// Each row's argmax (the last axis; rows of x F32 contiguous on a GPU), through argmaxInto.
std::vector<int64_t> argmax(const Tensor& x);

}  // namespace gizml::netops::normgpu
