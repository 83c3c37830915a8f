// The modulated norms of diffusion transformers (AdaLN, the gated sandwich norm) and PixelNorm,
// in F32 on the host and on a GPU (src/netops/norm_gpu.cpp). Each row's sums run in element
// order on both (a GPU thread a row), so both give the same bits.
#include <cmath>

#include "netops/exp_log.h"
#include "netops/rows_norm.h"

namespace gizml::netops {
namespace rows {

void checkModulated(const char* fn, const Tensor& x, const Tensor& w, const Tensor& shift, const Tensor& scale,
                    const Tensor& map, double eps) {
  requireRank(fn, "x", x, 2);
  const int64_t rows = x.size(0), width = x.size(1);
  check(width > 0, std::string(fn) + ": x has no columns");
  requireShape(fn, "w", w, {width});
  requireRank(fn, "shift", shift, 2);
  check(shift.size(1) == width, std::string(fn) + ": shift has width " + std::to_string(shift.size(1)) +
                                    ", x has " + std::to_string(width));
  requireShape(fn, "scale", scale, shift.shape());
  requireShape(fn, "map", map, {rows});
  check(eps >= 0.0, std::string(fn) + ": eps must not be negative");
}

normgpu::Modulated modulatedGpu(const char* fn, const Tensor& x, const Tensor& w, const Tensor& shift,
                                const Tensor& scale, const Tensor& map, double eps, bool centered) {
  checkModulated(fn, x, w, shift, scale, map, eps);
  return {normgpu::rowsOperand(fn, "x", x), f32Values(fn, "w", w),   f32Values(fn, "shift", shift),
          f32Values(fn, "scale", scale),   f32Values(fn, "map", map), eps, centered};
}

std::vector<float> modulatedRows(const char* fn, const Tensor& x, const Tensor& w, const Tensor& shift,
                                 const Tensor& scale, const Tensor& map, double eps, bool centered) {
  requireHost(fn, {{"x", &x}, {"w", &w}, {"shift", &shift}, {"scale", &scale}, {"map", &map}});
  checkModulated(fn, x, w, shift, scale, map, eps);
  const int64_t rows = x.size(0), width = x.size(1);
  const std::vector<int64_t> m = rowMap(fn, map, rows, shift.size(0));
  const Tensor xv = f32Values(fn, "x", x), wv = f32Values(fn, "w", w);
  const Tensor sh = f32Values(fn, "shift", shift), sc = f32Values(fn, "scale", scale);
  const float *xp = xv.data<float>(), *wp = wv.data<float>(), *shp = sh.data<float>(), *scp = sc.data<float>();
  const float e = static_cast<float>(eps), n = static_cast<float>(width);
  std::vector<float> out(static_cast<size_t>(rows * width));
  std::vector<float> centeredRow(static_cast<size_t>(width));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = xp + r * width;
    float mean = 0.0f, inv;
    if (centered) {
      float sum = 0.0f;
      for (int64_t c = 0; c < width; ++c) sum += row[c];
      mean = sum / n;
      for (int64_t c = 0; c < width; ++c) centeredRow[static_cast<size_t>(c)] = row[c] - mean;
      inv = inverseRms(centeredRow.data(), width, 1, e);  // the variance is the centered mean square
    } else {
      inv = inverseRms(row, width, 1, e);
    }
    const float* shiftRow = shp + m[static_cast<size_t>(r)] * width;
    const float* scaleRow = scp + m[static_cast<size_t>(r)] * width;
    float* y = out.data() + r * width;
    for (int64_t c = 0; c < width; ++c) {
      const float xhat = (centered ? centeredRow[static_cast<size_t>(c)] : row[c]) * inv;
      y[c] = xhat * wp[c] * (1.0f + scaleRow[c]) + shiftRow[c];
    }
  }
  return out;
}

}  // namespace rows

Tensor modulatedNorm(const Tensor& x, const Tensor& w, const Tensor& shift, const Tensor& scale, const Tensor& map,
                     double eps, bool centered) {
  constexpr const char* fn = "modulatedNorm";
  if (const auto gpu = gpuops::deviceOf(fn, {{"x", &x}, {"w", &w}, {"shift", &shift}, {"scale", &scale}, {"map", &map}})) {
    const normgpu::Modulated m = rows::modulatedGpu(fn, x, w, shift, scale, map, eps, centered);
    Tensor y = gpuops::empty(x.shape(), DType::BF16, gpu);  // the spec's BF16 on a GPU
    normgpu::modulatedInto(fn, m, y);
    return y;
  }
  const std::vector<float> values = rows::modulatedRows(fn, x, w, shift, scale, map, eps, centered);
  Tensor y = tensor::empty(x.shape(), DType::F32);
  rows::storeValues(y, values.data());
  return y;
}

void modulatedNormInto(const Tensor& x, const Tensor& w, const Tensor& shift, const Tensor& scale, const Tensor& map,
                       double eps, const Tensor& y, bool centered) {
  constexpr const char* fn = "modulatedNormInto";
  if (gpuops::deviceOf(fn, {{"x", &x}, {"w", &w}, {"shift", &shift}, {"scale", &scale}, {"map", &map}, {"y", &y}})) {
    const normgpu::Modulated m = rows::modulatedGpu(fn, x, w, shift, scale, map, eps, centered);
    rows::requireShape(fn, "y", y, x.shape());
    normgpu::modulatedInto(fn, m, y);
    return;
  }
  rows::requireHost(fn, {{"y", &y}});
  const std::vector<float> values = rows::modulatedRows(fn, x, w, shift, scale, map, eps, centered);
  rows::requireOutput(fn, "y", y, x.shape(), true);
  rows::storeValues(y, values.data());
}

void gatedNormAddInto(const Tensor& x, const Tensor& y, const Tensor& w, const Tensor& gate, const Tensor& map,
                      double eps) {
  constexpr const char* fn = "gatedNormAddInto";
  const auto gpu = gpuops::deviceOf(fn, {{"x", &x}, {"y", &y}, {"w", &w}, {"gate", &gate}, {"map", &map}});
  rows::requireRank(fn, "x", x, 2);
  const int64_t count = x.size(0), width = x.size(1);
  check(width > 0, std::string(fn) + ": x has no columns");
  if (!gpu) rows::requireOutput(fn, "x", x, x.shape(), false);
  rows::requireShape(fn, "y", y, x.shape());
  rows::requireShape(fn, "w", w, {width});
  rows::requireRank(fn, "gate", gate, 2);
  check(gate.size(1) == width, std::string(fn) + ": gate has width " + std::to_string(gate.size(1)) + ", x has " +
                                   std::to_string(width));
  check(eps >= 0.0, std::string(fn) + ": eps must not be negative");
  if (gpu) {
    rows::requireShape(fn, "map", map, {count});
    normgpu::gatedNormAdd(fn, x, normgpu::rowsOperand(fn, "y", y), rows::f32Values(fn, "w", w),
                          rows::f32Values(fn, "gate", gate), rows::f32Values(fn, "map", map), eps);
    return;
  }
  const std::vector<int64_t> m = rows::rowMap(fn, map, count, gate.size(0));
  const Tensor yv = rows::f32Values(fn, "y", y), wv = rows::f32Values(fn, "w", w), gv = rows::f32Values(fn, "gate", gate);
  float* xp = x.data<float>();
  const float *yp = yv.data<float>(), *wp = wv.data<float>(), *gp = gv.data<float>();
  for (int64_t r = 0; r < count; ++r) {
    const float* yr = yp + r * width;
    const float inv = rows::inverseRms(yr, width, 1, static_cast<float>(eps));
    const float* g = gp + m[static_cast<size_t>(r)] * width;
    for (int64_t c = 0; c < width; ++c) xp[r * width + c] += yr[c] * inv * wp[c] * g[c];
  }
}

void pixelNormInto(const Tensor& x, double eps, bool act, const Tensor& out) {
  constexpr const char* fn = "pixelNormInto";
  const auto gpu = gpuops::deviceOf(fn, {{"x", &x}, {"out", &out}});
  rows::requireRank(fn, "x", x, 3);
  rows::requireOutput(fn, "out", out, x.shape(), true);
  check(out.dtype() == x.dtype(), std::string(fn) + ": out is " + dtypeName(out.dtype()) + ", x is " +
                                      dtypeName(x.dtype()) + " (out has x's dtype)");
  check(eps >= 0.0, std::string(fn) + ": eps must not be negative");
  if (gpu) {
    normgpu::pixelNorm(fn, x, eps, act, out);
    return;
  }
  const int64_t frames = x.size(0), c = x.size(1), pixels = x.size(2);
  if (x.numel() == 0) return;
  const Tensor xv = rows::f32Values(fn, "x", x);  // a copy unless x is contiguous F32: out may be x
  const float* xp = xv.data<float>();
  std::vector<float> y(static_cast<size_t>(x.numel()));
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t p = 0; p < pixels; ++p) {
      const float* first = xp + f * c * pixels + p;
      const float inv = rows::inverseRms(first, c, pixels, static_cast<float>(eps));
      for (int64_t ch = 0; ch < c; ++ch) {
        float v = first[ch * pixels] * inv;
        if (act) v = v / (1.0f + detail::gz_exp(-v));  // the GPU's exp: the same bits there
        y[static_cast<size_t>(f * c * pixels + ch * pixels + p)] = v;
      }
    }
  rows::storeValues(out, y.data());
}

}  // namespace gizml::netops
