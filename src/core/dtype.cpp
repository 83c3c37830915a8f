#include <gizml/dtype.h>
#include <gizml/error.h>

#include <cmath>

namespace gizml {

size_t dtypeSize(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: return 4;
    case DType::F16: case DType::BF16: return 2;
    case DType::I8: case DType::U8: case DType::Bool: return 1;
    case DType::I64: case DType::F64: return 8;
    case DType::I4: throw Error("dtype i4 packs two elements a byte: it has no whole-byte element size");
  }
  throw Error("unknown dtype " + std::to_string(static_cast<int>(t)));
}

size_t dtypeBytes(DType t, int64_t count) {
  const auto n = static_cast<size_t>(count);
  return t == DType::I4 ? (n + 1) / 2 : n * dtypeSize(t);
}

const char* dtypeName(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I8: return "i8";
    case DType::U8: return "u8";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::Bool: return "bool";
    case DType::F64: return "f64";
    case DType::I4: return "i4";
  }
  return "?";
}

namespace {
// Rank within a kind: larger wins.
int floatRank(DType t) { return t == DType::F64 ? 4 : t == DType::F32 ? 3 : 2; }  // F16 and BF16 rank alike
int intBits(DType t) {
  switch (t) {
    case DType::I4: return 4;
    case DType::I8: case DType::U8: return 8;
    case DType::I32: return 32;
    default: return 64;
  }
}
}  // namespace

DType promoteTypes(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if (isFloat(a) && isFloat(b)) {
    if (floatRank(a) != floatRank(b)) return floatRank(a) > floatRank(b) ? a : b;
    return DType::F32;  // F16 with BF16: neither holds the other
  }
  if (isFloat(a)) return a;  // an integer with a float gives the float
  if (isFloat(b)) return b;
  // Two integers: the wider one; U8 with I8 or I4 needs a signed type that holds both.
  if ((a == DType::U8 || b == DType::U8) && (a == DType::I8 || b == DType::I8 || a == DType::I4 || b == DType::I4))
    return DType::I32;
  return intBits(a) >= intBits(b) ? a : b;
}

float doubleToF32RoundToOdd(double d) {
  float f = static_cast<float>(d);
  if (!std::isfinite(d) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= 1u;
  std::memcpy(&f, &bits, 4);
  return f;
}

float doubleToWorkingF32(double d, DType t) {
  switch (t) {
    case DType::F16: return halfToFloat(floatToHalf(doubleToF32RoundToOdd(d)));
    case DType::BF16: return bf16ToFloat(floatToBf16(doubleToF32RoundToOdd(d)));
    case DType::Bool: return d != 0.0 ? 1.0f : 0.0f;
    default: return static_cast<float>(d);
  }
}

uint16_t floatToHalf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x1ffu));  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): add the float to 0.5 (2^-1) so the FPU rounds the low bits.
    float magnitude;
    std::memcpy(&magnitude, &abs, 4);
    const float scaled = magnitude + 0.5f;
    uint32_t bits;
    std::memcpy(&bits, &scaled, 4);
    return static_cast<uint16_t>(sign | (bits - 0x3f000000u));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
  const uint32_t mantissaOdd = (abs >> 13) & 1u;
  const uint32_t rounded = abs + 0xc8000fffu + mantissaOdd;  // -(112 << 23) + 0xfff
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  uint32_t u;
  if (exponent == 0x1f) {
    u = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent == 0) {
    const float value = std::ldexp(static_cast<float>(mantissa), -24);
    std::memcpy(&u, &value, 4);
    u |= sign;
  } else {
    u = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace gizml
