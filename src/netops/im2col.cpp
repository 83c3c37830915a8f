// Patches for convolutions as one matmul (im2col, im2col1d) and their adjoints (col2im,
// col2im1d), which add each element's patch entries in increasing window offset. GPU operands run
// the same steps in netops_conv.cu.inc (conv_gpu.cpp), after the same checks.
#include "core/thread_pool.h"
#include "netops/conv_gpu.h"
#include "netops/operand.h"
#include "netops/windows.h"
#include "tensor/gpu/tensor_ops.h"

namespace gizml::netops {

Tensor im2col(const Tensor& xIn, int64_t kh, int64_t kw, int64_t stride, int64_t pad) {
  const char* fn = "im2col";
  const bool gpu = gpuops::deviceOf(std::string("netops::") + fn, {&xIn}) != nullptr;
  const Tensor x = detail::f32Operand(fn, "x", xIn, gpu);
  detail::requireRank(fn, "x", x, 4, "[n, c, h, w]");
  const int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  const int64_t oh = detail::windowCount(fn, "kh", h, kh, stride, pad, 1);
  const int64_t ow = detail::windowCount(fn, "kw", w, kw, stride, pad, 1);
  if (gpu) return detail::im2colGpu(x, kh, kw, stride, pad, oh, ow);
  const int64_t width = c * kh * kw;
  Tensor cols = tensor::empty({n * oh * ow, width});
  const float* px = x.data<float>();
  float* pc = cols.data<float>();
  core::parallelFor(n * oh * ow, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / (oh * ow), oy = r / ow % oh, ox = r % ow;
      float* out = pc + r * width;
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j) {
            const int64_t y = oy * stride + i - pad, xx = ox * stride + j - pad;
            const bool inside = y >= 0 && y < h && xx >= 0 && xx < w;
            *out++ = inside ? px[((b * c + ch) * h + y) * w + xx] : 0.0f;
          }
    }
  });
  return cols;
}

Tensor col2im(const Tensor& colsIn, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride,
              int64_t pad) {
  const char* fn = "col2im";
  const bool gpu = gpuops::deviceOf(std::string("netops::") + fn, {&colsIn}) != nullptr;
  const Tensor cols = detail::f32Operand(fn, "cols", colsIn, gpu);
  detail::requireAtLeast(fn, "n", n, 0);
  detail::requireAtLeast(fn, "c", c, 1);
  detail::requireAtLeast(fn, "h", h, 1);
  detail::requireAtLeast(fn, "w", w, 1);
  const int64_t oh = detail::windowCount(fn, "kh", h, kh, stride, pad, 1);
  const int64_t ow = detail::windowCount(fn, "kw", w, kw, stride, pad, 1);
  detail::requireShape(fn, "cols", cols, {n * oh * ow, c * kh * kw});
  if (gpu) return detail::col2imGpu(cols, n, c, h, w, kh, kw, stride, pad, oh, ow);
  Tensor x = tensor::empty({n, c, h, w});
  const float* pc = cols.data<float>();
  float* px = x.data<float>();
  const int64_t width = c * kh * kw;
  core::parallelFor(n * c * h, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / (c * h), ch = r / h % c, y = r % h;
      for (int64_t xx = 0; xx < w; ++xx) {
        float sum = 0.0f;
        for (int64_t i = 0; i < kh; ++i) {
          const int64_t ty = y + pad - i;
          if (ty < 0 || ty % stride != 0 || ty / stride >= oh) continue;
          for (int64_t j = 0; j < kw; ++j) {
            const int64_t tx = xx + pad - j;
            if (tx < 0 || tx % stride != 0 || tx / stride >= ow) continue;
            const int64_t row = (b * oh + ty / stride) * ow + tx / stride;
            sum += pc[row * width + (ch * kh + i) * kw + j];
          }
        }
        px[r * w + xx] = sum;
      }
    }
  });
  return x;
}

Tensor im2col1d(const Tensor& xIn, int64_t k, int64_t stride, int64_t pad, int64_t dilation, int64_t first,
                int64_t count) {
  const char* fn = "im2col1d";
  const bool gpu = gpuops::deviceOf(std::string("netops::") + fn, {&xIn}) != nullptr;
  const Tensor x = detail::f32Operand(fn, "x", xIn, gpu);
  detail::requireRank(fn, "x", x, 2, "[t, c]");
  const int64_t t = x.shape()[0], c = x.shape()[1];
  const int64_t ot = detail::windowCount(fn, "k", t, k, stride, pad, dilation);
  check(first >= 0 && first <= ot, detail::where(fn) + "first = " + std::to_string(first) + " is outside [0, " +
                                       std::to_string(ot) + "]");
  const int64_t rows = count < 0 ? ot - first : count;
  check(first + rows <= ot, detail::where(fn) + "count = " + std::to_string(count) + " from row " +
                                std::to_string(first) + " passes the " + std::to_string(ot) + " output rows");
  if (gpu) return detail::im2col1dGpu(x, k, stride, pad, dilation, first, rows);
  Tensor cols = tensor::empty({rows, c * k});
  const float* px = x.data<float>();
  float* pc = cols.data<float>();
  core::parallelFor(rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = first + r;
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t j = 0; j < k; ++j) {
          const int64_t at = o * stride + j * dilation - pad;
          pc[r * c * k + ch * k + j] = at >= 0 && at < t ? px[at * c + ch] : 0.0f;
        }
    }
  });
  return cols;
}

Tensor col2im1d(const Tensor& colsIn, int64_t c, int64_t length, int64_t k, int64_t stride, int64_t pad) {
  const char* fn = "col2im1d";
  const bool gpu = gpuops::deviceOf(std::string("netops::") + fn, {&colsIn}) != nullptr;
  const Tensor cols = detail::f32Operand(fn, "cols", colsIn, gpu);
  detail::requireRank(fn, "cols", cols, 2, "[n, c k]");
  detail::requireAtLeast(fn, "c", c, 1);
  detail::requireAtLeast(fn, "k", k, 1);
  detail::requireAtLeast(fn, "stride", stride, 1);
  detail::requireAtLeast(fn, "pad", pad, 0);
  detail::requireAtLeast(fn, "length", length, 0);
  const int64_t n = cols.shape()[0];
  detail::requireShape(fn, "cols", cols, {n, c * k});
  if (gpu) return detail::col2im1dGpu(cols, c, length, k, stride, pad);
  Tensor out = tensor::empty({length, c});
  const float* pc = cols.data<float>();
  float* po = out.data<float>();
  core::parallelFor(length, 16, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t ch = 0; ch < c; ++ch) {
        float sum = 0.0f;
        for (int64_t j = 0; j < k; ++j) {
          const int64_t t = o + pad - j;  // i stride
          if (t < 0 || t % stride != 0 || t / stride >= n) continue;
          sum += pc[(t / stride) * c * k + ch * k + j];
        }
        po[o * c + ch] = sum;
      }
  });
  return out;
}

}  // namespace gizml::netops
