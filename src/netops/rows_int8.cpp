// ConvRot's INT8 (and 4-bit) activation rows on the host: each group of 256 values times the
// regular Hadamard matrix over 16, a scale a row, codes rounded to nearest even. GPU operands go
// to one fused kernel (src/netops/norm_gpu.cpp) that takes the same steps, with the same bits.
#include <algorithm>
#include <cmath>

#include "cpu/convert.h"
#include "netops/rows_norm.h"

namespace gizml::netops {

// The GPU kernels (gz_nr_hadamard_rows, gz_nn_hadamard256) take the same steps for n = 256.
void rows::regularHadamard(float* v, int64_t n) {
  for (int64_t step = 1; step < n; step *= 4)
    for (int64_t base = 0; base < n; base += 4 * step)
      for (int64_t j = base; j < base + step; ++j) {
        const float a = v[j], b = v[j + step], c = v[j + 2 * step], d = v[j + 3 * step];
        v[j] = (((a + b) + c) - d) * 0.5f;
        v[j + step] = (((a + b) - c) + d) * 0.5f;
        v[j + 2 * step] = (((a - b) + c) + d) * 0.5f;
        v[j + 3 * step] = (((b - a) + c) + d) * 0.5f;
      }
}

namespace {

// The code width: `bits` as given (8 or 4), or 0 for q's own (4 for I4, else 8). An I4 q holds
// only 4-bit codes.
int64_t codeBits(const char* fn, int64_t bits, const Tensor& q) {
  const bool i4 = q.dtype() == DType::I4;
  if (bits == 0) return i4 ? 4 : 8;
  check(bits == 8 || bits == 4, std::string(fn) + ": bits must be 8 or 4, got " + std::to_string(bits));
  check(!i4 || bits == 4, std::string(fn) + ": q is I4, which holds 4-bit codes, but bits is " + std::to_string(bits));
  return bits;
}

// Rotates and quantizes rows of `width` values in place: values become their codes, scales
// gets each row's scale.
void quantizeRows(float* values, int64_t count, int64_t width, int64_t bits, float* scales) {
  const float top = bits == 8 ? 127.0f : 7.0f, lo = bits == 8 ? -128.0f : -8.0f;
  for (int64_t r = 0; r < count; ++r) {
    float* y = values + r * width;
    for (int64_t g = 0; g < width; g += rows::kInt8Group) rows::regularHadamard(y + g, rows::kInt8Group);
    float largest = 0.0f;
    for (int64_t c = 0; c < width; ++c) largest = std::max(largest, std::fabs(y[c]));
    const float s = std::max(largest / top, 1e-30f);
    for (int64_t c = 0; c < width; ++c) y[c] = std::clamp(std::nearbyint(y[c] / s), lo, top);
    scales[r] = s;
  }
}

void requireQuantOutputs(const char* fn, const Tensor& q, const Tensor& s, int64_t count, int64_t width) {
  rows::requireHost(fn, {{"q", &q}, {"s", &s}});
  rows::requireShape(fn, "q", q, {count, width});
  check(q.dtype() == DType::I8 || q.dtype() == DType::I4 || q.dtype() == DType::F32,
        std::string(fn) + ": q must be I8, I4 or F32, got " + dtypeName(q.dtype()));
  check(q.isContiguous(), std::string(fn) + ": q must be contiguous (it is written in place)");
  rows::requireOutput(fn, "s", s, {count, 1}, false);
}

void storeCodes(const Tensor& q, const std::vector<float>& codes) {
  if (q.dtype() == DType::F32) {
    rows::storeValues(q, codes.data());
    return;
  }
  // Codes are whole numbers within the dtype's range; NaN (from a NaN input) gives 0, as on a GPU.
  std::vector<int64_t> ints(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) ints[i] = std::isnan(codes[i]) ? 0 : static_cast<int64_t>(codes[i]);
  if (q.dtype() == DType::I4) return cpu::storeI4(q.rawData(), 0, ints.data(), static_cast<int64_t>(ints.size()));
  int8_t* dst = q.data<int8_t>();
  for (size_t i = 0; i < ints.size(); ++i) dst[i] = static_cast<int8_t>(ints[i]);
}

int64_t checkedWidth(const char* fn, const Tensor& x) {
  rows::requireRank(fn, "x", x, 2);
  const int64_t width = x.size(1);
  check(width > 0 && width % rows::kInt8Group == 0, std::string(fn) + ": x's width " + std::to_string(width) +
                                              " is not a positive multiple of 256 (the Hadamard groups)");
  return width;
}

}  // namespace

void int8RowsInto(const Tensor& x, const Tensor& q, const Tensor& s, int64_t bits) {
  constexpr const char* fn = "int8RowsInto";
  const bool gpu = gpuops::deviceOf(fn, {{"x", &x}, {"q", &q}, {"s", &s}}) != nullptr;
  bits = codeBits(fn, bits, q);
  const int64_t width = checkedWidth(fn, x), count = x.size(0);
  if (gpu) {
    rows::requireShape(fn, "q", q, {count, width});
    rows::requireShape(fn, "s", s, {count, 1});
    normgpu::int8RowsInto(fn, std::nullopt, normgpu::rowsOperand(fn, "x", x), std::nullopt, q, s, bits);
    return;
  }
  requireQuantOutputs(fn, q, s, count, width);
  const Tensor xv = rows::f32Values(fn, "x", x);
  std::vector<float> values(xv.data<float>(), xv.data<float>() + count * width);
  quantizeRows(values.data(), count, width, bits, s.data<float>());
  storeCodes(q, values);
}

std::vector<Tensor> int8Rows(const Tensor& x, int64_t bits) {
  constexpr const char* fn = "int8Rows";
  const auto gpu = gpuops::deviceOf(fn, {{"x", &x}});
  check(bits == 8 || bits == 4, std::string(fn) + ": bits must be 8 or 4, got " + std::to_string(bits));
  const int64_t width = checkedWidth(fn, x), count = x.size(0);
  // On a GPU the codes are I8, I4 for 4 bits; on the host F32 (the spec's).
  const DType codes = bits == 4 ? DType::I4 : DType::I8;
  Tensor q = gpu ? gpuops::empty({count, width}, codes, gpu) : tensor::empty({count, width});
  Tensor s = gpu ? gpuops::empty({count, 1}, DType::F32, gpu) : tensor::empty({count, 1});
  int8RowsInto(x, q, s, bits);
  return {q, s};
}

void modulatedInt8RowsInto(const Tensor& x, const Tensor& w, const Tensor& shift, const Tensor& scale,
                           const Tensor& map, double eps, const std::optional<Tensor>& y, const Tensor& q,
                           const Tensor& s, bool centered, int64_t bits) {
  constexpr const char* fn = "modulatedInt8RowsInto";
  const Tensor& yOrX = y ? *y : x;  // no y: x stands in, so the device check names only real operands
  const bool gpu = gpuops::deviceOf(fn, {{"x", &x}, {"w", &w}, {"shift", &shift}, {"scale", &scale}, {"map", &map},
                                      {y ? "y" : "x", &yOrX}, {"q", &q}, {"s", &s}}) != nullptr;
  bits = codeBits(fn, bits, q);
  if (gpu) {
    const normgpu::Modulated m = rows::modulatedGpu(fn, x, w, shift, scale, map, eps, centered);
    const int64_t width = checkedWidth(fn, x), count = x.size(0);
    rows::requireShape(fn, "q", q, {count, width});
    rows::requireShape(fn, "s", s, {count, 1});
    if (y) rows::requireShape(fn, "y", *y, x.shape());
    normgpu::int8RowsInto(fn, m, m.x, y, q, s, bits);
    return;
  }
  std::vector<float> values = rows::modulatedRows(fn, x, w, shift, scale, map, eps, centered);
  const int64_t width = checkedWidth(fn, x), count = x.size(0);
  requireQuantOutputs(fn, q, s, count, width);
  if (y) {
    rows::requireHost(fn, {{"y", &*y}});
    rows::requireOutput(fn, "y", *y, x.shape(), true);
    rows::storeValues(*y, values.data());
  }
  quantizeRows(values.data(), count, width, bits, s.data<float>());
  storeCodes(q, values);
}

}  // namespace gizml::netops
