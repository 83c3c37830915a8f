// Convolution by patches: patchRows builds the patch matrix of a band of output rows (no padded
// copy of x); lazyConv and lazyConv3 multiply the weights by it, deferred (a Lazy::Product) so
// that the elementwise tail runs on each tile of the product. On the host a tile is the patches
// of a band of output pixels times w (sgemm, the additions in matmul's order); on a GPU the
// product is computed whole when the expression is evaluated: the patches come from
// gz_conv_patch_rows, or, for BF16 3 x 3 convolutions on NVIDIA's matrix cores, are read from x
// inside the product (gz_conv_implicit_*, never stored; docs/netops.md).
#include <algorithm>
#include <functional>

#include "cpu/gemm.h"
#include "netops/conv_gpu.h"
#include "netops/operand.h"
#include "netops/rows_common.h"
#include "tensor/gpu/tensor_ops.h"
#include "tensor/lazy_node.h"

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

// The patches of one image xp ([c, h, w] F32) for the output pixels p0 .. p1 (of oh ow, row by
// row) into out: [c kh kw, p1 - p0], zero where the window reaches into the padding.
void gatherPatches(const float* xp, const ConvShape& s, int64_t kh, int64_t kw, int64_t pad, int64_t p0, int64_t p1,
                   float* out) {
  const int64_t cols = p1 - p0;
  for (int64_t ch = 0; ch < s.c; ++ch)
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        float* row = out + ((ch * kh + i) * kw + j) * cols;
        for (int64_t p = p0; p < p1;) {  // a run of pixels within one output row
          const int64_t oy = p / s.ow, ox0 = p % s.ow, ox1 = std::min(s.ow, ox0 + (p1 - p));
          const int64_t y = oy + i - pad;
          float* dst = row + (p - p0) - ox0;
          // Pixels ox of [lo, hi) read x[ch, y, ox + j - pad]; the rest of the run is padding.
          const bool inside = y >= 0 && y < s.h;
          const int64_t lo = inside ? std::clamp(pad - j, ox0, ox1) : ox1, hi = inside ? std::clamp(s.w + pad - j, lo, ox1) : ox1;
          std::fill(dst + ox0, dst + lo, 0.0f);
          if (inside) std::copy(xp + (ch * s.h + y) * s.w + lo + j - pad, xp + (ch * s.h + y) * s.w + hi + j - pad, dst + lo);
          std::fill(dst + hi, dst + ox1, 0.0f);
          p += ox1 - ox0;
        }
      }
}

// Tiles of this many patch values (1 MiB of F32) stay in L2 while sgemm reads them.
constexpr int64_t kTilePatchValues = int64_t{1} << 18;

// The host's convolution product, deferred: w ([o, c kh kw] F32) times the patches of `images`
// images of x (F32, contiguous; image g at x + g imageStride), [images, o, oh ow] (shape says
// how it is seen). A tile is one image's o rows by a band of pixels: its patches are gathered and
// multiplied by sgemm, whose order of additions does not depend on the band, so every tile holds
// the bits of the whole product (w.matmul(patchRows(x))).
class HostConvProduct final : public tensor::Lazy::Product {
 public:
  HostConvProduct(Tensor w, Tensor x, ConvShape s, int64_t kh, int64_t kw, int64_t pad, int64_t images,
                  int64_t imageStride, tensor::Shape shape)
      : w_(std::move(w)), x_(std::move(x)), s_(s), kh_(kh), kw_(kw), pad_(pad), images_(images),
        imageStride_(imageStride), shape_(std::move(shape)) {}

  const Tensor& operand() const override { return x_; }
  bool tiles() const override { return true; }
  int64_t tileRows() const override { return w_.size(0); }
  int64_t tileColumns() const override { return std::max<int64_t>(16, kTilePatchValues / std::max<int64_t>(1, w_.size(1))); }

  void computeTile(int64_t image, int64_t j0, int64_t j1, float* out) const override {
    const int64_t depth = w_.size(1), cols = j1 - j0;
    thread_local std::vector<float> patches;
    patches.resize(static_cast<size_t>(depth * cols));
    gatherPatches(x_.data<float>() + image * imageStride_, s_, kh_, kw_, pad_, j0, j1, patches.data());
    cpu::sgemm(w_.size(0), cols, depth, w_.data<float>(), depth, 1, patches.data(), cols, 1, out, cols, false);
  }

  bool storeTail(const tensor::Lazy::Node&, const Tensor&) const override { return false; }  // runs in tiles

  // Band by band as the tiles (the patches of a whole image could be far larger than x).
  Tensor compute() const override {
    Tensor out = tensor::empty(shape_);
    const int64_t o = w_.size(0), pixels = s_.oh * s_.ow, band = tileColumns();
    std::vector<float> tile(static_cast<size_t>(o * std::min(band, pixels)));
    for (int64_t image = 0; image < images_; ++image)
      for (int64_t j0 = 0; j0 < pixels; j0 += band) {
        const int64_t cols = std::min(band, pixels - j0);
        computeTile(image, j0, j0 + cols, tile.data());
        for (int64_t r = 0; r < o; ++r)
          std::copy_n(tile.data() + r * cols, cols, out.data<float>() + (image * o + r) * pixels + j0);
      }
    return out;
  }

 private:
  Tensor w_, x_;
  ConvShape s_;
  int64_t kh_, kw_, pad_, images_, imageStride_;
  tensor::Shape shape_;
};

// A GPU's convolution product, deferred. With `tail` (the implicit product) the expression over
// it runs in the product's store; without, the product is computed whole by its kernels when the
// expression is evaluated, then the expression as the generated elementwise kernel over it.
using TailStore = std::function<void(const tensor::Lazy::Node&, const Tensor&)>;
class GpuConvProduct final : public tensor::Lazy::Product {
 public:
  GpuConvProduct(Tensor operand, std::function<Tensor()> product, TailStore tail = {})
      : operand_(std::move(operand)), product_(std::move(product)), tail_(std::move(tail)) {}

  const Tensor& operand() const override { return operand_; }
  Tensor compute() const override { return product_(); }
  bool storeTail(const tensor::Lazy::Node& root, const Tensor& out) const override {
    if (!tail_) return false;
    tail_(root, out);
    return true;
  }
  bool tiles() const override { return false; }
  int64_t tileRows() const override { return 0; }
  int64_t tileColumns() const override { return 0; }
  void computeTile(int64_t, int64_t, int64_t, float*) const override {
    throw Error("lazyConv: a GPU's product is computed whole, not in tiles");
  }

 private:
  Tensor operand_;
  std::function<Tensor()> product_;
  TailStore tail_;
};

}  // namespace

Tensor patchRows(const Tensor& x, int64_t kh, int64_t kw, int64_t pad, int64_t r0, int64_t r1, DType dtype) {
  constexpr const char* fn = "patchRows";
  const bool gpu = gpuops::deviceOf(std::string("netops::") + fn, {&x}) != nullptr;
  const ConvShape s = checkConv(fn, x, kh, kw, pad);
  check(0 <= r0 && r0 <= r1 && r1 <= s.oh, std::string(fn) + ": rows r0 " + std::to_string(r0) + " to r1 " +
                                               std::to_string(r1) + " are not within the " + std::to_string(s.oh) +
                                               " output rows");
  check(isFloat(dtype) && dtype != DType::F64, std::string(fn) + ": dtype must be F32, F16 or BF16, got " + dtypeName(dtype));
  if (gpu) return detail::patchRowsGpu(detail::floatOperand(fn, "x", x), kh, kw, pad, r0, r1, s.ow, dtype);
  const Tensor xv = rows::f32Values(fn, "x", x);
  Tensor out = tensor::empty({s.c * kh * kw, (r1 - r0) * s.ow});
  gatherPatches(xv.data<float>(), s, kh, kw, pad, r0 * s.ow, r1 * s.ow, out.data<float>());
  return out.cast(dtype);
}

Lazy lazyConv(const Tensor& w, const Tensor& x, int64_t kh, int64_t kw, int64_t pad, DType compute) {
  constexpr const char* fn = "lazyConv";
  const bool gpu = gpuops::deviceOf(std::string("netops::") + fn, {&w, &x}) != nullptr;
  const ConvShape s = checkConv(fn, x, kh, kw, pad);
  check(isFloat(compute) && compute != DType::F64, std::string(fn) + ": compute must be F32, F16 or BF16, got " + dtypeName(compute));
  rows::requireRank(fn, "w", w, 2);
  check(w.size(1) == s.c * kh * kw, std::string(fn) + ": w has " + std::to_string(w.size(1)) +
                                        " inputs, x's patches have c kh kw = " + std::to_string(s.c * kh * kw));
  const int64_t o = w.size(0);
  if (gpu) {
    const Tensor wf = detail::floatOperand(fn, "w", w);
    if (patchesInProduct(x, s.w, kh, kw, pad, compute)) {
      const Tensor xi = implicitOperand(fn, x), wb = wf.cast(DType::BF16);
      return Lazy::deferred(
          std::make_shared<GpuConvProduct>(
              xi,
              [wb, xi, s, kh, kw, pad, o] {
                return detail::implicitConvGpu(wb, xi, 1, 0, s.c, s.h, s.w, kh, kw, pad, s.oh, s.ow)
                    .reshape({o, s.oh * s.ow});
              },
              [wb, xi, s, kh, kw, pad](const tensor::Lazy::Node& root, const Tensor& out) {
                detail::implicitConvTailGpu(wb, xi, 1, 0, s.c, s.h, s.w, kh, kw, pad, s.oh, s.ow, root, out);
              }),
          {o, s.oh * s.ow});
    }
    // Elsewhere the patches are built first in `compute`. F32: the GPU matmul adds in the host's
    // order (the host's bits). F16/BF16: the GPU's half-precision product, back to F32 as the host
    // returns it.
    return Lazy::deferred(std::make_shared<GpuConvProduct>(x, [wf, x, kh, kw, pad, oh = s.oh, compute] {
                            const Tensor patches = patchRows(x, kh, kw, pad, 0, oh, compute);
                            if (compute == DType::F32) return wf.matmul(patches);
                            return wf.cast(compute).matmul(patches).cast(DType::F32);
                          }),
                          {o, s.oh * s.ow});
  }
  // The host's product is in F32 whatever `compute` says.
  return Lazy::deferred(std::make_shared<HostConvProduct>(rows::f32Values(fn, "w", w), rows::f32Values(fn, "x", x), s,
                                                          kh, kw, pad, 1, 0, tensor::Shape{o, s.oh * s.ow}),
                        {o, s.oh * s.ow});
}

Lazy lazyConv3(const Tensor& w, const Tensor& x) {
  constexpr const char* fn = "lazyConv3";
  const bool gpu = gpuops::deviceOf(std::string("netops::") + fn, {&w, &x}) != nullptr;
  rows::requireRank(fn, "x", x, 4);
  rows::requireRank(fn, "w", w, 2);
  const int64_t n = x.size(0) - 2, c = x.size(1), h = x.size(2), wd = x.size(3);
  check(n >= 1, std::string(fn) + ": x must hold frames 0 to n + 1 with n >= 1, got " +
                    std::to_string(x.size(0)) + " frames");
  check(w.size(1) == 27 * c, std::string(fn) + ": w has " + std::to_string(w.size(1)) + " inputs, expected 27 c = " +
                                 std::to_string(27 * c));
  const tensor::Shape shape{n, w.size(0), h * wd};
  // Image t - 1 is frames t - 1 .. t + 1, contiguous in x, as 3 c channels (w's (time, channel)
  // input order), c h w elements after the one before.
  if (!gpu) {
    const ConvShape s{3 * c, h, wd, h, wd};
    return Lazy::deferred(std::make_shared<HostConvProduct>(rows::f32Values(fn, "w", w), rows::f32Values(fn, "x", x), s,
                                                            3, 3, 1, n, c * h * wd, shape),
                          shape);
  }
  if (patchesInProduct(x, wd, 3, 3, 1, DType::BF16)) {  // one product of the n images
    const Tensor wf = detail::floatOperand(fn, "w", w).cast(DType::BF16), xi = implicitOperand(fn, x);
    return Lazy::deferred(
        std::make_shared<GpuConvProduct>(
            xi, [wf, xi, n, c, h, wd] { return detail::implicitConvGpu(wf, xi, n, c * h * wd, 3 * c, h, wd, 3, 3, 1, h, wd); },
            [wf, xi, n, c, h, wd](const tensor::Lazy::Node& root, const Tensor& out) {
              detail::implicitConvTailGpu(wf, xi, n, c * h * wd, 3 * c, h, wd, 3, 3, 1, h, wd, root, out);
            }),
        shape);
  }
  return Lazy::deferred(std::make_shared<GpuConvProduct>(x, [w, x, n, c, h, wd] {
                          std::vector<Tensor> frames;  // a lazyConv a frame, in F32
                          frames.reserve(static_cast<size_t>(n));
                          for (int64_t t = 1; t <= n; ++t) {
                            const Tensor window = x.slice(0, t - 1, t + 2).reshape({3 * c, h, wd});
                            frames.push_back(lazyConv(w, window, 3, 3, 1, DType::F32).eval());
                          }
                          return tensor::stack(frames, 0);
                        }),
                        shape);
}

}  // namespace gizml::netops
