#pragma once
// Loading elements of any dtype into the three working representations of elementwise code
// (f32 for F32/F16/BF16 and bools, f64 for F64, i64 for integers) and storing them back.
#include <gizml/dtype.h>

#include <cstdint>

namespace gizml::cpu {

/// The working representation of a dtype: f32, f64 (F64 alone) or i64 (the integers).
inline bool worksInF64(DType t) { return t == DType::F64; }
inline bool worksInF32(DType t) { return (isFloat(t) && !worksInF64(t)) || t == DType::Bool; }

/// out[i] = element i of the run at base with `stride` elements between them (0 repeats one).
void loadF32(DType src, const void* base, int64_t stride, int64_t n, float* out);
void loadI64(DType src, const void* base, int64_t stride, int64_t n, int64_t* out);
/// Stores a run into contiguous elements of dst; the values are already exact in dst.
void storeF32(DType dst, const float* in, int64_t n, void* out);
void storeI64(DType dst, const int64_t* in, int64_t n, void* out);

/// I4 runs: element i of a run is nibble `first + i * stride` of the bytes at base (element 2k in
/// the low nibble of byte k, 2k + 1 in the high one), sign-extended.
void loadI4(const void* base, int64_t first, int64_t stride, int64_t n, int64_t* out);
/// Stores n values (already in [-8, 7]) into nibbles first, first + 1, ... of the bytes at base,
/// leaving the other nibble of a shared first or last byte as it was.
void storeI4(void* base, int64_t first, const int64_t* in, int64_t n);

namespace convert_kernels {
/// out[i] = in[i] (F16 bits) widened, by F16C: only on CPUs that have it (cpuFeatures().f16c).
void widenHalfF16c(const uint16_t* in, int64_t n, float* out);
/// out[i] = in[i] rounded to F16 (nearest even, floatToHalf's bits, NaN payloads included), by F16C.
void narrowHalfF16c(const float* in, int64_t n, uint16_t* out);
}  // namespace convert_kernels

/// Rounds f32 values in place to what dst holds: F16/BF16 round to nearest even, Bool to 0/1.
void roundF32To(DType dst, float* values, int64_t n);
/// Wraps i64 values in place to dst's width (two's complement, as NumPy): the result of
/// arithmetic in dst.
void wrapI64To(DType dst, int64_t* values, int64_t n);
/// An integer cast in place: wraps to dst's width as wrapI64To, except that I4 (quantization
/// codes) saturates at [-8, 7].
void castI64ToI64(DType dst, int64_t* values, int64_t n);
/// Casts between the representations with dst's semantics: floats to integers truncate toward
/// zero and saturate (NaN gives 0), except I4, which rounds to nearest even before it saturates
/// at [-8, 7] (int8Rows' codes); anything to Bool is `!= 0`.
void castF32ToI64(DType dst, const float* in, int64_t n, int64_t* out);
void castI64ToF32(DType dst, const int64_t* in, int64_t n, float* out);

/// F64 runs: loaded from and stored to F64 elements only (other dtypes come through casts).
void loadF64(const void* base, int64_t stride, int64_t n, double* out);
/// f32 working values (F32/F16/BF16/Bool) widened to f64: exact.
void castF32ToF64(const float* in, int64_t n, double* out);
/// f64 values to dst's f32 working values: F16/BF16 rounded once (through f32 rounded to odd),
/// F32 to nearest even, Bool `!= 0`.
void castF64ToF32(DType dst, const double* in, int64_t n, float* out);
/// As castF32ToI64: truncation toward zero (I4: to nearest even), saturating, NaN gives 0.
void castF64ToI64(DType dst, const double* in, int64_t n, int64_t* out);
/// Integers to f64, rounding to nearest even beyond 2^53.
void castI64ToF64(const int64_t* in, int64_t n, double* out);

}  // namespace gizml::cpu
