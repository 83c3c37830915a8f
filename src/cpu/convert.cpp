#include "cpu/convert.h"

#include <gizml/error.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "cpu/cpu_features.h"

namespace gizml::cpu {
namespace {

template <class S, class F>
void gather(const void* base, int64_t stride, int64_t n, F&& put) {
  const S* p = static_cast<const S*>(base);
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) put(i, p[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) put(i, p[i * stride]);
  }
}

int64_t bounds(DType t, bool upper) {
  switch (t) {
    case DType::I4: return upper ? 7 : -8;
    case DType::I8: return upper ? 127 : -128;
    case DType::U8: return upper ? 255 : 0;
    case DType::I32: return upper ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min();
    default: return upper ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
}

}  // namespace

void loadF32(DType src, const void* base, int64_t stride, int64_t n, float* out) {
  switch (src) {
    case DType::F32:
      if (stride == 1) {
        std::memcpy(out, base, static_cast<size_t>(n) * 4);
      } else {
        gather<float>(base, stride, n, [&](int64_t i, float v) { out[i] = v; });
      }
      return;
    case DType::F16: {
      static const bool f16c = cpuFeatures().f16c;
      if (stride == 1 && f16c) return convert_kernels::widenHalfF16c(static_cast<const uint16_t*>(base), n, out);
      gather<uint16_t>(base, stride, n, [&](int64_t i, uint16_t v) { out[i] = halfToFloat(v); });
      return;
    }
    case DType::BF16:
      gather<uint16_t>(base, stride, n, [&](int64_t i, uint16_t v) { out[i] = bf16ToFloat(v); });
      return;
    case DType::Bool:
      gather<uint8_t>(base, stride, n, [&](int64_t i, uint8_t v) { out[i] = v ? 1.0f : 0.0f; });
      return;
    default:
      throw Error(std::string("loadF32: ") + dtypeName(src) + " is not a float type");
  }
}

void loadI64(DType src, const void* base, int64_t stride, int64_t n, int64_t* out) {
  switch (src) {
    case DType::I8: gather<int8_t>(base, stride, n, [&](int64_t i, int8_t v) { out[i] = v; }); return;
    case DType::U8: gather<uint8_t>(base, stride, n, [&](int64_t i, uint8_t v) { out[i] = v; }); return;
    case DType::I32: gather<int32_t>(base, stride, n, [&](int64_t i, int32_t v) { out[i] = v; }); return;
    case DType::I64: gather<int64_t>(base, stride, n, [&](int64_t i, int64_t v) { out[i] = v; }); return;
    default:
      throw Error(std::string("loadI64: ") + dtypeName(src) + " is not an integer type");
  }
}

void storeF32(DType dst, const float* in, int64_t n, void* out) {
  switch (dst) {
    case DType::F32: if (n > 0) std::memcpy(out, in, static_cast<size_t>(n) * 4); return;
    case DType::F16: {
      auto* o = static_cast<uint16_t*>(out);
      static const bool f16c = cpuFeatures().f16c;
      if (f16c) return convert_kernels::narrowHalfF16c(in, n, o);
      for (int64_t i = 0; i < n; ++i) o[i] = floatToHalf(in[i]);
      return;
    }
    case DType::BF16: {
      auto* o = static_cast<uint16_t*>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = floatToBf16(in[i]);
      return;
    }
    case DType::Bool: {
      auto* o = static_cast<uint8_t*>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = in[i] != 0.0f;
      return;
    }
    default:
      throw Error(std::string("storeF32: ") + dtypeName(dst) + " is not a float type");
  }
}

void storeI64(DType dst, const int64_t* in, int64_t n, void* out) {
  switch (dst) {
    case DType::I8: { auto* o = static_cast<int8_t*>(out); for (int64_t i = 0; i < n; ++i) o[i] = static_cast<int8_t>(in[i]); return; }
    case DType::U8: { auto* o = static_cast<uint8_t*>(out); for (int64_t i = 0; i < n; ++i) o[i] = static_cast<uint8_t>(in[i]); return; }
    case DType::I32: { auto* o = static_cast<int32_t*>(out); for (int64_t i = 0; i < n; ++i) o[i] = static_cast<int32_t>(in[i]); return; }
    case DType::I64: if (n > 0) std::memcpy(out, in, static_cast<size_t>(n) * 8); return;
    default:
      throw Error(std::string("storeI64: ") + dtypeName(dst) + " is not an integer type");
  }
}

void loadI4(const void* base, int64_t first, int64_t stride, int64_t n, int64_t* out) {
  const auto* bytes = static_cast<const uint8_t*>(base);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t e = first + i * stride;
    const int nibble = (bytes[e >> 1] >> ((e & 1) * 4)) & 0xf;
    out[i] = (nibble ^ 8) - 8;  // sign-extend bit 3
  }
}

void storeI4(void* base, int64_t first, const int64_t* in, int64_t n) {
  auto* bytes = static_cast<uint8_t*>(base);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t e = first + i;
    const int shift = static_cast<int>(e & 1) * 4;
    uint8_t& b = bytes[e >> 1];
    b = static_cast<uint8_t>((b & ~(0xf << shift)) | ((in[i] & 0xf) << shift));
  }
}

void roundF32To(DType dst, float* v, int64_t n) {
  switch (dst) {
    case DType::F16: for (int64_t i = 0; i < n; ++i) v[i] = halfToFloat(floatToHalf(v[i])); return;
    case DType::BF16: for (int64_t i = 0; i < n; ++i) v[i] = bf16ToFloat(floatToBf16(v[i])); return;
    case DType::Bool: for (int64_t i = 0; i < n; ++i) v[i] = v[i] != 0.0f ? 1.0f : 0.0f; return;
    default: return;
  }
}

void wrapI64To(DType dst, int64_t* v, int64_t n) {
  switch (dst) {
    case DType::I4: for (int64_t i = 0; i < n; ++i) v[i] = ((v[i] & 0xf) ^ 8) - 8; return;
    case DType::I8: for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int8_t>(v[i]); return;
    case DType::U8: for (int64_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(v[i]); return;
    case DType::I32: for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(v[i]); return;
    default: return;
  }
}

void castI64ToI64(DType dst, int64_t* v, int64_t n) {
  if (dst != DType::I4) return wrapI64To(dst, v, n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::clamp<int64_t>(v[i], -8, 7);
}

namespace {
// A float to dst's integer: truncated toward zero (I4: rounded to nearest even, as int8Rows
// rounds its codes), saturating at dst's range, NaN gives 0.
template <class F>
void floatToI64(DType dst, const F* in, int64_t n, int64_t* out) {
  const double lo = static_cast<double>(bounds(dst, false)), hi = static_cast<double>(bounds(dst, true));
  const bool nearest = dst == DType::I4;
  for (int64_t i = 0; i < n; ++i) {
    const double x = nearest ? std::nearbyint(static_cast<double>(in[i])) : std::trunc(static_cast<double>(in[i]));
    if (std::isnan(x)) out[i] = 0;
    else if (x <= lo) out[i] = bounds(dst, false);
    else if (x >= hi) out[i] = bounds(dst, true);
    else out[i] = static_cast<int64_t>(x);
  }
}
}  // namespace

void castF32ToI64(DType dst, const float* in, int64_t n, int64_t* out) { floatToI64(dst, in, n, out); }

void loadF64(const void* base, int64_t stride, int64_t n, double* out) {
  if (stride == 1) {
    if (n > 0) std::memcpy(out, base, static_cast<size_t>(n) * 8);
  } else {
    gather<double>(base, stride, n, [&](int64_t i, double v) { out[i] = v; });
  }
}

void castF32ToF64(const float* in, int64_t n, double* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i];
}

void castF64ToF32(DType dst, const double* in, int64_t n, float* out) {
  switch (dst) {
    case DType::F32: for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]); return;
    case DType::F16: case DType::BF16: case DType::Bool:
      for (int64_t i = 0; i < n; ++i) out[i] = doubleToWorkingF32(in[i], dst);
      return;
    default:
      throw Error(std::string("castF64ToF32: ") + dtypeName(dst) + " does not work in f32");
  }
}

void castF64ToI64(DType dst, const double* in, int64_t n, int64_t* out) { floatToI64(dst, in, n, out); }

void castI64ToF64(const int64_t* in, int64_t n, double* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(in[i]);
}

namespace {
// v as an f32 rounded to odd (truncated, the last bit set when bits were dropped). Rounding
// that once more to nearest even at 11 or 8 bits gives the correctly rounded F16/BF16 value;
// rounding to nearest even twice (int -> f32 -> bf16) can land on a tie the first rounding
// made (2^24 + 2^16 + 1 -> 2^24 + 2^16 -> 2^24 instead of 2^24 + 2^17).
float toF32RoundToOdd(int64_t v) {
  const uint64_t a = v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  if (a < (uint64_t{1} << 24)) return static_cast<float>(v);  // exact
  const int shift = 64 - std::countl_zero(a) - 24;
  uint64_t q = a >> shift;
  if (a & ((uint64_t{1} << shift) - 1)) q |= 1;
  const float f = std::ldexp(static_cast<float>(q), shift);  // q < 2^24: exact
  return v < 0 ? -f : f;
}
}  // namespace

void castI64ToF32(DType dst, const int64_t* in, int64_t n, float* out) {
  if (dst == DType::F16 || dst == DType::BF16) {
    for (int64_t i = 0; i < n; ++i) out[i] = toF32RoundToOdd(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
  }
  roundF32To(dst, out, n);
}

}  // namespace gizml::cpu
