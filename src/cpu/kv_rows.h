#pragma once
// Inner loops over rows stored as F32, F16 or BF16 (a KV cache's keys and values, 16-bit weight
// rows in decode): a dot product with floats and a weighted sum of rows, converting on the fly
// (F16C or a shift, in registers) so that a narrow row is read at its own width.
#include <gizml/dtype.h>

#include <cstdint>

namespace gizml::cpu {

/// The dot product of x (n floats) with `row`, n values of type t (F32, F16 or BF16).
float dotStoredRow(DType t, const void* row, const float* x, int64_t n);
/// y (n floats) += a * row.
void addScaledStoredRow(DType t, const void* row, float a, float* y, int64_t n);
/// The kernel these run on this CPU ("avx2+f16c" or "portable"), for `giz info`.
const char* storedRowsKernel();

}  // namespace gizml::cpu
