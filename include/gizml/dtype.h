#pragma once
// Element types and the conversions between them.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace gizml {

// F64 and I4 are last so that the numbers of the others stay as they were. F64 computes in double
// on the CPU only: GPU tensors, tile programs and the quantized LLM paths reject it. I4 is a signed
// 4-bit integer, two a byte (element 2k in the low nibble, 2k + 1 in the high one): int8Rows'
// 4-bit codes. GPUs hold it for copies and int8RowsInto only (docs/tensor.md).
enum class DType : uint8_t { F32, F16, BF16, I8, U8, I32, I64, Bool, F64, I4 };

/// The dtypes that every backend (the CPU and the GPUs) supports: all but F64 and I4.
inline constexpr DType kAllDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::I8,
                                       DType::U8,  DType::I32, DType::I64,  DType::Bool};

/// Bytes of one element; an Error for I4, whose elements are half a byte (use dtypeBytes).
size_t dtypeSize(DType t);
/// Bytes that `count` contiguous elements take: count times the size, ceil(count / 2) for I4.
size_t dtypeBytes(DType t, int64_t count);
const char* dtypeName(DType t);
inline bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}
inline bool isInteger(DType t) { return !isFloat(t) && t != DType::Bool; }

/// The type of a binary operation's result (docs/tensor.md, "Type promotion").
DType promoteTypes(DType a, DType b);

/// d as an f32 rounded to odd (toward zero, the last bit set when inexact): rounding that to
/// F16/BF16 to nearest even gives d correctly rounded, where two roundings to nearest could not.
float doubleToF32RoundToOdd(double d);
/// d in dtype t's working f32 value: F16/BF16 rounded once from the double, F32 (and F64, whose
/// working type is double: callers keep its doubles) as is.
float doubleToWorkingF32(double d, DType t);

// IEEE binary16 and bfloat16 conversions, rounding to nearest even; NaN stays NaN.
uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);
inline uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16ToFloat(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace gizml
