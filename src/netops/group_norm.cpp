// GroupNorm, channel first: each group's mean and variance summed in f64 in element order (a
// GPU sums slices in f32 and adds them in f64; the host adds in f64 throughout), then each
// element ((x - mean) rstd) w + b in f32, SiLU when asked (x / (1 + gz_exp(-x)), the GPU's exp).
// GPU operands: src/netops/norm_gpu.cpp, normgpu::kGroupSlices slices a group.
#include <cmath>

#include "core/thread_pool.h"
#include "cpu/norm_act.h"
#include "netops/norm_gpu.h"
#include "netops/operand.h"

namespace gizml::netops {
namespace {

// One group of `channels` channels of `pixels` values (in, out): the sums in f64 in order, each
// channel's affine and SiLU a SIMD kernel (cpu/norm_act.h, the same bits).
void normalizeGroup(const float* in, int64_t channels, int64_t pixels, const float* pw,
                                     const float* pb, double eps, bool act, float* out) {
  const int64_t count = channels * pixels;
  double sum = 0.0;
  for (int64_t i = 0; i < count; ++i) sum += in[i];
  const double mean = count ? sum / static_cast<double>(count) : 0.0;
  double squares = 0.0;
  for (int64_t i = 0; i < count; ++i) squares += (in[i] - mean) * (in[i] - mean);
  const double variance = count ? squares / static_cast<double>(count) : 0.0;
  const float mu = static_cast<float>(mean), rstd = static_cast<float>(1.0 / std::sqrt(variance + eps));
  for (int64_t ch = 0; ch < channels; ++ch)
    cpu::normalizeAct(in + ch * pixels, pixels, mu, rstd, pw[ch], pb[ch], act, out + ch * pixels);
}

}  // namespace

Tensor groupNorm(const Tensor& xIn, int64_t groups, const Tensor& wIn, const Tensor& bIn, double eps, bool act,
                 DType dtype) {
  const char* fn = "groupNorm";
  const bool onGpu = gpuops::deviceOf("netops::groupNorm", {{"x", &xIn}, {"w", &wIn}, {"b", &bIn}}) != nullptr;
  const auto operand = onGpu ? detail::floatOperand : detail::hostF32;
  const Tensor x = operand(fn, "x", xIn), w = operand(fn, "w", wIn), b = operand(fn, "b", bIn);
  check(x.ndim() >= 1, detail::where(fn) + "x of shape " + tensor::shapeText(x.shape()) + " must be [c, ...]");
  check(isFloat(dtype) && dtype != DType::F64, detail::where(fn) + "dtype " + dtypeName(dtype) + " is not F32, F16 or BF16");
  check(eps >= 0.0, detail::where(fn) + "eps = " + std::to_string(eps) + " is negative");
  const int64_t c = x.shape()[0];
  detail::requireAtLeast(fn, "groups", groups, 1);
  check(c % groups == 0, detail::where(fn) + "groups = " + std::to_string(groups) + " does not divide the " +
                             std::to_string(c) + " channels of x");
  detail::requireShape(fn, "w", w, {c});
  detail::requireShape(fn, "b", b, {c});
  if (onGpu) {
    const Tensor y = normgpu::groupNorm(x, groups, w, b, eps, act);
    return dtype == DType::F32 ? y : y.cast(dtype);
  }
  const int64_t pixels = c == 0 ? 0 : x.numel() / c, perGroup = c / groups * pixels;
  Tensor y = tensor::empty(x.shape());
  const float *px = x.data<float>(), *pw = w.data<float>(), *pb = b.data<float>();
  float* py = y.data<float>();
  core::parallelFor(groups, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) normalizeGroup(px + g * perGroup, c / groups, pixels, pw + g * (c / groups),
                                                     pb + g * (c / groups), eps, act, py + g * perGroup);
  });
  return dtype == DType::F32 ? y : y.cast(dtype);
}

}  // namespace gizml::netops
