// Convolution by patches: patchRows builds the patch matrix of a band of output rows (no padded
// copy of x); lazyConv and lazyConv3 multiply the weights by it. On a GPU the patches come from
// gz_conv_patch_rows, or, for BF16 3 x 3 convolutions on NVIDIA's matrix cores, are read from x
// inside the product (gz_conv_implicit_*, never stored; docs/netops.md).
#include "netops/conv_gpu.h"
#include "netops/operand.h"
#include "netops/rows_common.h"

namespace gizml::netops {
namespace {

struct ConvShape {
  int64_t c, h, w, oh, ow;
};

ConvShape checkConv(const char* fn, const Tensor& x, int64_t kh, int64_t kw, int64_t pad) {
  rows::requireRank(fn, "x", x, 3);
  check(kh > 0 && kw > 0, std::string(fn) + ": the window kh x kw must be positive, got " + std::to_string(kh) +
                              " x " + std::to_string(kw));
  check(pad >= 0, std::string(fn) + ": pad must not be negative, got " + std::to_string(pad));
  ConvShape s{x.size(0), x.size(1), x.size(2), x.size(1) + 2 * pad - kh + 1, x.size(2) + 2 * pad - kw + 1};
  check(s.oh > 0 && s.ow > 0, std::string(fn) + ": a " + std::to_string(kh) + " x " + std::to_string(kw) +
                                  " window does not fit x " + tensor::shapeText(x.shape()) + " with pad " +
                                  std::to_string(pad));
  return s;
}

// Whether the product reads the patches from x itself: NVIDIA's matrix cores, BF16, 3 x 3, pad 1,
// rows of x a multiple of 8 pixels (the spec's conditions for Product.patch).
bool patchesInProduct(const Tensor& x, int64_t width, int64_t kh, int64_t kw, int64_t pad, DType compute) {
  return compute == DType::BF16 && kh == 3 && kw == 3 && pad == 1 && width % 8 == 0 && detail::implicitConvRuns(x);
}

// x as the implicit product reads it: contiguous BF16 as given, anything else as contiguous F32
// (rounded to BF16 as the patches are gathered).
Tensor implicitOperand(const char* fn, const Tensor& x) {
  return x.dtype() == DType::BF16 ? x.contiguous() : detail::floatOperand(fn, "x", x);
}

}  // namespace

Tensor patchRows(const Tensor& x, int64_t kh, int64_t kw, int64_t pad, int64_t r0, int64_t r1, DType dtype) {
  constexpr const char* fn = "patchRows";
  const bool gpu = detail::onGpu(fn, {&x});
  const ConvShape s = checkConv(fn, x, kh, kw, pad);
  check(0 <= r0 && r0 <= r1 && r1 <= s.oh, std::string(fn) + ": rows r0 " + std::to_string(r0) + " to r1 " +
                                               std::to_string(r1) + " are not within the " + std::to_string(s.oh) +
                                               " output rows");
  check(isFloat(dtype) && dtype != DType::F64, std::string(fn) + ": dtype must be F32, F16 or BF16, got " + dtypeName(dtype));
  if (gpu) return detail::patchRowsGpu(detail::floatOperand(fn, "x", x), kh, kw, pad, r0, r1, s.ow, dtype);
  const Tensor xv = rows::f32Values(fn, "x", x);
  const float* xp = xv.data<float>();
  const int64_t cols = (r1 - r0) * s.ow;
  Tensor out = tensor::zeros({s.c * kh * kw, cols});
  float* op = out.data<float>();
  for (int64_t ch = 0; ch < s.c; ++ch)
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        float* row = op + ((ch * kh + i) * kw + j) * cols;
        for (int64_t oy = r0; oy < r1; ++oy) {
          const int64_t y = oy + i - pad;
          if (y < 0 || y >= s.h) continue;
          for (int64_t ox = 0; ox < s.ow; ++ox) {
            const int64_t xx = ox + j - pad;
            if (xx >= 0 && xx < s.w) row[(oy - r0) * s.ow + ox] = xp[(ch * s.h + y) * s.w + xx];
          }
        }
      }
  return out.cast(dtype);
}

Lazy lazyConv(const Tensor& w, const Tensor& x, int64_t kh, int64_t kw, int64_t pad, DType compute) {
  constexpr const char* fn = "lazyConv";
  const bool gpu = detail::onGpu(fn, {&w, &x});
  const ConvShape s = checkConv(fn, x, kh, kw, pad);
  check(isFloat(compute) && compute != DType::F64, std::string(fn) + ": compute must be F32, F16 or BF16, got " + dtypeName(compute));
  rows::requireRank(fn, "w", w, 2);
  check(w.size(1) == s.c * kh * kw, std::string(fn) + ": w has " + std::to_string(w.size(1)) +
                                        " inputs, x's patches have c kh kw = " + std::to_string(s.c * kh * kw));
  if (gpu) {
    const Tensor wf = detail::floatOperand(fn, "w", w);
    const int64_t o = w.size(0);
    if (patchesInProduct(x, s.w, kh, kw, pad, compute))
      return tensor::lazy(detail::implicitConvGpu(wf.cast(DType::BF16), implicitOperand(fn, x), 1, 0, s.c, s.h, s.w, kh,
                                                  kw, pad, s.oh, s.ow)
                              .reshape({o, s.oh * s.ow}));
    // Elsewhere the patches are built first in `compute`. F32: the GPU matmul adds in the host's
    // order (the host's bits). F16/BF16: the GPU's half-precision product, back to F32 as the host
    // returns it.
    const Tensor patches = patchRows(x, kh, kw, pad, 0, s.oh, compute);
    if (compute == DType::F32) return tensor::lazy(wf.matmul(patches));
    return tensor::lazy(wf.cast(compute).matmul(patches).cast(DType::F32));
  }
  // The host computes the product now (in F32) and hands it over as a Lazy leaf: what the caller
  // chains on (bias, activation) still runs as one fused pass over it.
  const Tensor patches = patchRows(x, kh, kw, pad, 0, s.oh, DType::F32);
  return tensor::lazy(rows::f32Values(fn, "w", w).matmul(patches));
}

Lazy lazyConv3(const Tensor& w, const Tensor& x) {
  constexpr const char* fn = "lazyConv3";
  const bool gpu = detail::onGpu(fn, {&w, &x});
  rows::requireRank(fn, "x", x, 4);
  rows::requireRank(fn, "w", w, 2);
  const int64_t n = x.size(0) - 2, c = x.size(1), h = x.size(2), wd = x.size(3);
  check(n >= 1, std::string(fn) + ": x must hold frames 0 to n + 1 with n >= 1, got " +
                    std::to_string(x.size(0)) + " frames");
  check(w.size(1) == 27 * c, std::string(fn) + ": w has " + std::to_string(w.size(1)) + " inputs, expected 27 c = " +
                                 std::to_string(27 * c));
  if (gpu && patchesInProduct(x, wd, 3, 3, 1, DType::BF16)) {
    // One product of n images: image t - 1 is frames t - 1 .. t + 1, contiguous in x, as 3 c
    // channels (w's (time, channel) input order), c h w elements after the one before.
    const Tensor wf = detail::floatOperand(fn, "w", w).cast(DType::BF16);
    return tensor::lazy(detail::implicitConvGpu(wf, implicitOperand(fn, x), n, c * h * wd, 3 * c, h, wd, 3, 3, 1, h, wd));
  }
  std::vector<Tensor> frames;
  frames.reserve(static_cast<size_t>(n));
  for (int64_t t = 1; t <= n; ++t) {
    // Frames t - 1 .. t + 1 as one image of 3 c channels: (time, channel) order, as w's inputs.
    const Tensor window = x.slice(0, t - 1, t + 2).reshape({3 * c, h, wd});
    frames.push_back(lazyConv(w, window, 3, 3, 1, DType::F32).eval());
  }
  return tensor::lazy(tensor::stack(frames, 0));
}

}  // namespace gizml::netops
