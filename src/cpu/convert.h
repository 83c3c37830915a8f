#pragma once
// Loading elements of any dtype into the two working representations of elementwise code
// (f32 for floats and bools, i64 for integers) and storing them back.
#include <gizml/dtype.h>

#include <cstdint>

namespace gizml::cpu {

/// The working representation of a dtype: f32 (true) or i64 (false).
inline bool worksInF32(DType t) { return isFloat(t) || t == DType::Bool; }

/// out[i] = element i of the run at base with `stride` elements between them (0 repeats one).
void loadF32(DType src, const void* base, int64_t stride, int64_t n, float* out);
void loadI64(DType src, const void* base, int64_t stride, int64_t n, int64_t* out);
/// Stores a run into contiguous elements of dst; the values are already exact in dst.
void storeF32(DType dst, const float* in, int64_t n, void* out);
void storeI64(DType dst, const int64_t* in, int64_t n, void* out);

/// Rounds f32 values in place to what dst holds: F16/BF16 round to nearest even, Bool to 0/1.
void roundF32To(DType dst, float* values, int64_t n);
/// Wraps i64 values in place to dst's width (two's complement, as NumPy).
void wrapI64To(DType dst, int64_t* values, int64_t n);
/// Casts between the representations with dst's semantics: floats to integers truncate toward
/// zero and saturate (NaN gives 0); anything to Bool is `!= 0`.
void castF32ToI64(DType dst, const float* in, int64_t n, int64_t* out);
void castI64ToF32(DType dst, const int64_t* in, int64_t n, float* out);

}  // namespace gizml::cpu
