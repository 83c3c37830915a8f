// Argument checks and host access of the rows part of gizml::netops.
#include "netops/rows_common.h"

#include <cmath>
#include <cstring>

namespace gizml::netops::rows {

void requireHost(const char* fn, std::initializer_list<std::pair<const char*, const Tensor*>> operands) {
  for (const auto& [name, t] : operands)
    check(!t->onGpu(), std::string(fn) + ": " + name + " is on " + t->device() +
                           "; this function runs on host tensors only so far (move it with host())");
}

void requireShape(const char* fn, const char* name, const Tensor& t, const Shape& shape) {
  check(t.shape() == shape, std::string(fn) + ": " + name + " has shape " + tensor::shapeText(t.shape()) +
                                ", expected " + tensor::shapeText(shape));
}

void requireRank(const char* fn, const char* name, const Tensor& t, int64_t rank) {
  check(t.ndim() == rank, std::string(fn) + ": " + name + " must have rank " + std::to_string(rank) +
                              ", got shape " + tensor::shapeText(t.shape()));
}

Tensor f32Values(const char* fn, const char* name, const Tensor& t) {
  check(isFloat(t.dtype()) && t.dtype() != DType::F64,
        std::string(fn) + ": " + name + " must be a float tensor (F32, F16 or BF16), got " + dtypeName(t.dtype()));
  return t.cast(DType::F32).contiguous();
}

void requireOutput(const char* fn, const char* name, const Tensor& out, const Shape& shape, bool allowBf16) {
  requireShape(fn, name, out, shape);
  check(out.dtype() == DType::F32 || (allowBf16 && out.dtype() == DType::BF16),
        std::string(fn) + ": " + name + " must be F32" + (allowBf16 ? " or BF16" : "") + ", got " +
            dtypeName(out.dtype()));
  check(out.isContiguous(), std::string(fn) + ": " + name + " must be contiguous (it is written in place)");
}

void storeValues(const Tensor& out, const float* values) {
  const int64_t n = out.numel();
  if (out.dtype() == DType::F32) {
    float* dst = out.data<float>();
    if (dst != values) std::memmove(dst, values, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  uint16_t* dst = out.data<uint16_t>();
  for (int64_t i = 0; i < n; ++i) dst[i] = floatToBf16(values[i]);
}

std::vector<int64_t> rowMap(const char* fn, const Tensor& map, int64_t rows, int64_t limit) {
  requireShape(fn, "map", map, {rows});
  const Tensor m = f32Values(fn, "map", map);
  const float* v = m.data<float>();
  std::vector<int64_t> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const float f = v[r];
    check(f >= 0.0f && f < static_cast<float>(limit) && f == std::floor(f),
          std::string(fn) + ": map[" + std::to_string(r) + "] = " + std::to_string(f) +
              " is not a row index of the modulation rows (0 to " + std::to_string(limit - 1) + ")");
    out[static_cast<size_t>(r)] = static_cast<int64_t>(f);
  }
  return out;
}

float inverseRms(const float* x, int64_t n, int64_t step, float eps) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i * step] * x[i * step];
  return 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
}

}  // namespace gizml::netops::rows
