// layerNorm and its gradient: each row's sums in order in f32 (the spec's "in-order sums"), rows
// in parallel; dweight and dbias add over rows in order (columns in parallel). On a GPU the same
// steps, a thread a row (src/gpu/kernels/netops.cu.inc).
#include <cmath>

#include "core/thread_pool.h"
#include "gpu/tensor_ops.h"
#include "netops/gpu_kernels.h"
#include "netops/operand.h"

namespace gizml::netops {
namespace {

// Rows of x's last axis: (rows, width) and the shape of the per-row results.
struct RowShape {
  int64_t rows, width;
  tensor::Shape rowResults;
};

RowShape rowShape(const char* fn, const Tensor& x) {
  check(x.ndim() >= 1, detail::where(fn) + "x of shape " + tensor::shapeText(x.shape()) + " needs at least one axis");
  const int64_t width = x.shape().back();
  check(width > 0, detail::where(fn) + "x of shape " + tensor::shapeText(x.shape()) + " has empty rows");
  return {x.numel() / width, width, tensor::Shape(x.shape().begin(), x.shape().end() - 1)};
}

}  // namespace

std::vector<Tensor> layerNorm(const Tensor& xIn, const Tensor& weightIn, const Tensor& biasIn, double eps) {
  const char* fn = "layerNorm";
  const bool onGpu = gpuops::deviceOf("netops::layerNorm", {&xIn, &weightIn, &biasIn}) != nullptr;
  const auto operand = onGpu ? detail::floatOperand : detail::hostF32;
  const Tensor x = operand(fn, "x", xIn), weight = operand(fn, "weight", weightIn), bias = operand(fn, "bias", biasIn);
  const RowShape s = rowShape(fn, x);
  detail::requireShape(fn, "weight", weight, {s.width});
  detail::requireShape(fn, "bias", bias, {s.width});
  check(eps >= 0.0, detail::where(fn) + "eps = " + std::to_string(eps) + " is negative");
  if (onGpu) return detail::layerNormGpu(x, weight, bias, static_cast<float>(eps));
  Tensor y = tensor::empty(x.shape()), mean = tensor::empty(s.rowResults), rstd = tensor::empty(s.rowResults);
  const float* px = x.data<float>();
  const float *pw = weight.data<float>(), *pb = bias.data<float>();
  float *py = y.data<float>(), *pm = mean.data<float>(), *pr = rstd.data<float>();
  const float n = static_cast<float>(s.width), e = static_cast<float>(eps);
  core::parallelFor(s.rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = px + r * s.width;
      float sum = 0.0f;
      for (int64_t j = 0; j < s.width; ++j) sum += row[j];
      const float mu = sum / n;
      float squares = 0.0f;
      for (int64_t j = 0; j < s.width; ++j) {
        const float d = row[j] - mu;
        squares += d * d;
      }
      const float inv = 1.0f / std::sqrt(squares / n + e);
      for (int64_t j = 0; j < s.width; ++j) py[r * s.width + j] = (row[j] - mu) * inv * pw[j] + pb[j];
      pm[r] = mu;
      pr[r] = inv;
    }
  });
  return {y, mean, rstd};
}

std::vector<Tensor> layerNormGrad(const Tensor& dyIn, const Tensor& xIn, const Tensor& weightIn, const Tensor& meanIn,
                                  const Tensor& rstdIn) {
  const char* fn = "layerNormGrad";
  const bool onGpu =
      gpuops::deviceOf("netops::layerNormGrad", {&dyIn, &xIn, &weightIn, &meanIn, &rstdIn}) != nullptr;
  const auto operand = onGpu ? detail::floatOperand : detail::hostF32;
  const Tensor dy = operand(fn, "dy", dyIn), x = operand(fn, "x", xIn), weight = operand(fn, "weight", weightIn);
  const Tensor mean = operand(fn, "mean", meanIn), rstd = operand(fn, "rstd", rstdIn);
  const RowShape s = rowShape(fn, x);
  detail::requireShape(fn, "dy", dy, x.shape());
  detail::requireShape(fn, "weight", weight, {s.width});
  detail::requireShape(fn, "mean", mean, s.rowResults);
  detail::requireShape(fn, "rstd", rstd, s.rowResults);
  if (onGpu) return detail::layerNormGradGpu(dy, x, weight, mean, rstd);
  Tensor dx = tensor::empty(x.shape()), xhat = tensor::empty(x.shape());
  const float *pdy = dy.data<float>(), *px = x.data<float>(), *pw = weight.data<float>();
  const float *pm = mean.data<float>(), *pr = rstd.data<float>();
  float *pdx = dx.data<float>(), *ph = xhat.data<float>();
  const int64_t width = s.width;
  const float n = static_cast<float>(width);
  core::parallelFor(s.rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t at = r * width;
      float sumG = 0.0f, sumGX = 0.0f;
      for (int64_t j = 0; j < width; ++j) {
        const float h = (px[at + j] - pm[r]) * pr[r];
        const float g = pdy[at + j] * pw[j];
        ph[at + j] = h;
        sumG += g;
        sumGX += g * h;
      }
      const float meanG = sumG / n, meanGX = sumGX / n;
      for (int64_t j = 0; j < width; ++j)
        pdx[at + j] = pr[r] * (pdy[at + j] * pw[j] - meanG - ph[at + j] * meanGX);
    }
  });
  Tensor dweight = tensor::zeros({width}), dbias = tensor::zeros({width});
  float *pdw = dweight.data<float>(), *pdb = dbias.data<float>();
  core::parallelFor(width, 64, [&](int64_t j0, int64_t j1) {
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t j = j0; j < j1; ++j) {
        pdw[j] += pdy[r * width + j] * ph[r * width + j];
        pdb[j] += pdy[r * width + j];
      }
  });
  return {dx, dweight, dbias};
}

}  // namespace gizml::netops
