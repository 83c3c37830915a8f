// ConvRot's W8A8 linear (int8_linear.h) from netops::int8Rows: the weight's rows are rotated and
// quantized by the same function as the activations, so its per-row scale is the per-output-
// channel scale max |H w| / 127.
#include "int8_linear.h"

#include <gizhw/gpu.h>
#include <gizml/error.h>
#include <gizml/netops.h>

namespace gizml::diffusion {

namespace {

constexpr int64_t kGroup = 256;  // int8Rows rotates groups of this many values

// x [rows, in] with zero columns up to `width`, on x's device.
T::Tensor padded(const T::Tensor& x, int64_t width) {
  if (x.size(1) == width) return x.contiguous();
  T::Tensor zeros = T::zeros({x.size(0), width - x.size(1)});
  if (x.onGpu()) zeros = zeros.on(gizhw::gpu::Gpu(x.storage()->gpu()));
  return T::concat({x, zeros}, 1);
}

}  // namespace

Int8Linear::Int8Linear(const T::Tensor& w) : in_(w.size(1)) {
  if (w.ndim() != 2 || w.dtype() != DType::F32 || w.onGpu())
    throw Error("Int8Linear: weight of shape " + T::shapeText(w.shape()) + " is not an [out, in] F32 host matrix");
  const int64_t width = (in_ + kGroup - 1) / kGroup * kGroup;
  const std::vector<T::Tensor> qs = netops::int8Rows(padded(w, width));
  codes_ = qs[0].cast(DType::I8).transpose(0, 1).contiguous();
  scales_ = qs[1].reshape({1, w.size(0)}).contiguous();
}

T::Tensor Int8Linear::operator()(const T::Tensor& x) const {
  if (x.ndim() != 2 || x.size(1) != in_)
    throw Error("Int8Linear: input of shape " + T::shapeText(x.shape()) + " is not [rows, " + std::to_string(in_) +
                "]");
  const std::vector<T::Tensor> qs = netops::int8Rows(padded(x.cast(DType::F32), codes_.size(0)));
  // Codes of up to 127 times 127, summed over the input: exact in I32 (matmul sums in i64).
  const T::Tensor sums = T::matmul(qs[0].cast(DType::I32), codes_);
  return (T::lazy(sums).cast(DType::F32) * T::lazy(qs[1]) * T::lazy(scales_)).eval();
}

Int8Linear Int8Linear::to(const gizhw::gpu::Gpu& gpu) const {
  Int8Linear l;
  l.in_ = in_;
  l.codes_ = codes_.on(gpu);
  l.scales_ = scales_.on(gpu);
  return l;
}

}  // namespace gizml::diffusion
