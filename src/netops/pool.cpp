// 2-D max and mean pooling without padding, and their gradient: windows are read in order
// (i, then j); the gradient scatters each window's share in window order (oy, then ox), which
// adds every element's terms over the windows holding it in increasing order. On a GPU a thread
// an output (pool2d) or an input element (pool2dGrad) takes the same terms in the same order
// (netops_conv.cu.inc), so both give the same bits.
#include <cmath>

#include "core/thread_pool.h"
#include "netops/conv_gpu.h"
#include "netops/operand.h"
#include "netops/windows.h"
#include "tensor/gpu/tensor_ops.h"

namespace gizml::netops {
namespace {

struct PoolDims {
  int64_t planes, h, w, oh, ow;
};

PoolDims checkedDims(const char* fn, const Tensor& x, int64_t size, int64_t stride) {
  detail::requireRank(fn, "x", x, 4, "[n, c, h, w]");
  const int64_t h = x.shape()[2], w = x.shape()[3];
  return {x.shape()[0] * x.shape()[1], h, w, detail::windowCount(fn, "size", h, size, stride, 0, 1),
          detail::windowCount(fn, "size", w, size, stride, 0, 1)};
}

// The offset in its plane of the first largest element of window (oy, ox); NaN wins, as in torch.
int64_t windowMax(const float* plane, const PoolDims& s, int64_t size, int64_t stride, int64_t oy, int64_t ox) {
  int64_t best = oy * stride * s.w + ox * stride;
  for (int64_t i = 0; i < size; ++i)
    for (int64_t j = 0; j < size; ++j) {
      const int64_t at = (oy * stride + i) * s.w + ox * stride + j;
      if (std::isnan(plane[best])) return best;
      if (plane[at] > plane[best] || std::isnan(plane[at])) best = at;
    }
  return best;
}

}  // namespace

Tensor pool2d(const Tensor& xIn, int64_t size, int64_t stride, bool average) {
  const char* fn = "pool2d";
  const bool gpu = gpuops::deviceOf(std::string("netops::") + fn, {&xIn}) != nullptr;
  const Tensor x = detail::f32Operand(fn, "x", xIn, gpu);
  const PoolDims s = checkedDims(fn, x, size, stride);
  const float inv = static_cast<float>(1.0 / static_cast<double>(size * size));
  const tensor::Shape shape{x.shape()[0], x.shape()[1], s.oh, s.ow};
  if (gpu) return detail::poolGpu(x, {s.planes, s.h, s.w, s.oh, s.ow, size, stride}, average, inv, shape);
  Tensor y = tensor::empty(shape);
  const float* px = x.data<float>();
  float* py = y.data<float>();
  core::parallelFor(s.planes, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* plane = px + p * s.h * s.w;
      float* out = py + p * s.oh * s.ow;
      for (int64_t oy = 0; oy < s.oh; ++oy)
        for (int64_t ox = 0; ox < s.ow; ++ox) {
          if (!average) {
            out[oy * s.ow + ox] = plane[windowMax(plane, s, size, stride, oy, ox)];
            continue;
          }
          float sum = 0.0f;
          for (int64_t i = 0; i < size; ++i)
            for (int64_t j = 0; j < size; ++j) sum += plane[(oy * stride + i) * s.w + ox * stride + j];
          out[oy * s.ow + ox] = sum * inv;
        }
    }
  });
  return y;
}

Tensor pool2dGrad(const Tensor& dyIn, const Tensor& xIn, int64_t size, int64_t stride, bool average) {
  const char* fn = "pool2dGrad";
  const bool gpu = gpuops::deviceOf(std::string("netops::") + fn, {&dyIn, &xIn}) != nullptr;
  const Tensor dy = detail::f32Operand(fn, "dy", dyIn, gpu), x = detail::f32Operand(fn, "x", xIn, gpu);
  const PoolDims s = checkedDims(fn, x, size, stride);
  detail::requireShape(fn, "dy", dy, {x.shape()[0], x.shape()[1], s.oh, s.ow});
  const float count = static_cast<float>(size * size);
  if (gpu) return detail::poolGradGpu(dy, x, {s.planes, s.h, s.w, s.oh, s.ow, size, stride}, average, count);
  Tensor dx = tensor::zeros(x.shape());
  const float *px = x.data<float>(), *pdy = dy.data<float>();
  float* pdx = dx.data<float>();
  core::parallelFor(s.planes, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* plane = px + p * s.h * s.w;
      const float* g = pdy + p * s.oh * s.ow;
      float* out = pdx + p * s.h * s.w;
      for (int64_t oy = 0; oy < s.oh; ++oy)
        for (int64_t ox = 0; ox < s.ow; ++ox) {
          const float gy = g[oy * s.ow + ox];
          if (!average) {
            out[windowMax(plane, s, size, stride, oy, ox)] += gy;
            continue;
          }
          const float share = gy / count;
          for (int64_t i = 0; i < size; ++i)
            for (int64_t j = 0; j < size; ++j) out[(oy * stride + i) * s.w + ox * stride + j] += share;
        }
    }
  });
  return dx;
}

}  // namespace gizml::netops
