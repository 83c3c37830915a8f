// layerNorm and its gradient: each row's sums in order in f32 (the spec's "in-order sums"), rows
// in parallel; dweight and dbias add over rows in order (columns in parallel). On a GPU the same
// steps, a thread a row (src/netops/kernels/netops.cu.inc). F64 operands run the same steps in f64
// (on the host only).
#include <cmath>
#include <type_traits>

#include "core/thread_pool.h"
#include "netops/gpu_kernels.h"
#include "netops/operand.h"
#include "tensor/gpu/tensor_ops.h"

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

// The host's steps in R (float for F32, double for F64); x, weight and bias are contiguous R.
template <class R>
std::vector<Tensor> layerNormHost(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const RowShape& s) {
  const DType dt = std::is_same_v<R, double> ? DType::F64 : DType::F32;
  Tensor y = tensor::empty(x.shape(), dt), mean = tensor::empty(s.rowResults, dt), rstd = tensor::empty(s.rowResults, dt);
  const R* px = x.data<R>();
  const R *pw = weight.data<R>(), *pb = bias.data<R>();
  R *py = y.data<R>(), *pm = mean.data<R>(), *pr = rstd.data<R>();
  const R n = static_cast<R>(s.width), e = static_cast<R>(eps);
  core::parallelFor(s.rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const R* row = px + r * s.width;
      R sum = 0;
      for (int64_t j = 0; j < s.width; ++j) sum += row[j];
      const R mu = sum / n;
      R squares = 0;
      for (int64_t j = 0; j < s.width; ++j) {
        const R d = row[j] - mu;
        squares += d * d;
      }
      const R inv = R(1) / std::sqrt(squares / n + e);
      for (int64_t j = 0; j < s.width; ++j) py[r * s.width + j] = (row[j] - mu) * inv * pw[j] + pb[j];
      pm[r] = mu;
      pr[r] = inv;
    }
  });
  return {y, mean, rstd};
}

}  // namespace

std::vector<Tensor> layerNorm(const Tensor& xIn, const Tensor& weightIn, const Tensor& biasIn, double eps) {
  const char* fn = "layerNorm";
  const bool f64 = detail::anyF64({&xIn, &weightIn, &biasIn});
  const bool onGpu = !f64 && gpuops::deviceOf("netops::layerNorm", {&xIn, &weightIn, &biasIn}) != nullptr;
  const auto operand = f64 ? detail::hostF64 : onGpu ? detail::floatOperand : detail::hostF32;
  const Tensor x = operand(fn, "x", xIn), weight = operand(fn, "weight", weightIn), bias = operand(fn, "bias", biasIn);
  const RowShape s = rowShape(fn, x);
  detail::requireShape(fn, "weight", weight, {s.width});
  detail::requireShape(fn, "bias", bias, {s.width});
  check(eps >= 0.0, detail::where(fn) + "eps = " + std::to_string(eps) + " is negative");
  if (onGpu) return detail::layerNormGpu(x, weight, bias, static_cast<float>(eps));
  return f64 ? layerNormHost<double>(x, weight, bias, eps, s) : layerNormHost<float>(x, weight, bias, eps, s);
}

namespace {

template <class R>
std::vector<Tensor> layerNormGradHost(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                      const Tensor& rstd, const RowShape& s) {
  const DType dt = std::is_same_v<R, double> ? DType::F64 : DType::F32;
  Tensor dx = tensor::empty(x.shape(), dt), xhat = tensor::empty(x.shape(), dt);
  const R *pdy = dy.data<R>(), *px = x.data<R>(), *pw = weight.data<R>();
  const R *pm = mean.data<R>(), *pr = rstd.data<R>();
  R *pdx = dx.data<R>(), *ph = xhat.data<R>();
  const int64_t width = s.width;
  const R n = static_cast<R>(width);
  core::parallelFor(s.rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t at = r * width;
      R sumG = 0, sumGX = 0;
      for (int64_t j = 0; j < width; ++j) {
        const R h = (px[at + j] - pm[r]) * pr[r];
        const R g = pdy[at + j] * pw[j];
        ph[at + j] = h;
        sumG += g;
        sumGX += g * h;
      }
      const R meanG = sumG / n, meanGX = sumGX / n;
      for (int64_t j = 0; j < width; ++j)
        pdx[at + j] = pr[r] * (pdy[at + j] * pw[j] - meanG - ph[at + j] * meanGX);
    }
  });
  Tensor dweight = tensor::zeros({width}, dt), dbias = tensor::zeros({width}, dt);
  R *pdw = dweight.data<R>(), *pdb = dbias.data<R>();
  core::parallelFor(width, 64, [&](int64_t j0, int64_t j1) {
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t j = j0; j < j1; ++j) {
        pdw[j] += pdy[r * width + j] * ph[r * width + j];
        pdb[j] += pdy[r * width + j];
      }
  });
  return {dx, dweight, dbias};
}

}  // namespace

std::vector<Tensor> layerNormGrad(const Tensor& dyIn, const Tensor& xIn, const Tensor& weightIn, const Tensor& meanIn,
                                  const Tensor& rstdIn) {
  const char* fn = "layerNormGrad";
  const bool f64 = detail::anyF64({&dyIn, &xIn, &weightIn, &meanIn, &rstdIn});
  const bool onGpu =
      !f64 && gpuops::deviceOf("netops::layerNormGrad", {&dyIn, &xIn, &weightIn, &meanIn, &rstdIn}) != nullptr;
  const auto operand = f64 ? detail::hostF64 : onGpu ? detail::floatOperand : detail::hostF32;
  const Tensor dy = operand(fn, "dy", dyIn), x = operand(fn, "x", xIn), weight = operand(fn, "weight", weightIn);
  const Tensor mean = operand(fn, "mean", meanIn), rstd = operand(fn, "rstd", rstdIn);
  const RowShape s = rowShape(fn, x);
  detail::requireShape(fn, "dy", dy, x.shape());
  detail::requireShape(fn, "weight", weight, {s.width});
  detail::requireShape(fn, "mean", mean, s.rowResults);
  detail::requireShape(fn, "rstd", rstd, s.rowResults);
  if (onGpu) return detail::layerNormGradGpu(dy, x, weight, mean, rstd);
  return f64 ? layerNormGradHost<double>(dy, x, weight, mean, rstd, s) : layerNormGradHost<float>(dy, x, weight, mean, rstd, s);
}

}  // namespace gizml::netops
