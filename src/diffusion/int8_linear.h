#pragma once
// A bias-free linear layer x Wᵀ as ConvRot's W8A8 runs it: W's rows rotated by the regular
// Hadamard matrix of 256 along the input and quantized to INT8 per output channel once, at load;
// each call rotates and quantizes the activation rows the same way (netops::int8Rows) and
// multiplies the codes exactly in integers, then scales back by the row's and the channel's
// scales. The rotation is orthogonal, so (H x) . (H w) = x . w: only the rounding to 8 bits
// differs from the F32 product.
#include <gizml/tensor.h>

namespace gizml::diffusion {

class Int8Linear {
 public:
  /// w [out, in] F32 (on the host): inputs not a multiple of 256 are padded with zeros, which
  /// the rotation and the product leave exact.
  explicit Int8Linear(const tensor::Tensor& w);

  /// x [rows, in] F32 to [rows, out] F32, where x is (the codes and scales go with x: on a GPU
  /// after `to`).
  tensor::Tensor operator()(const tensor::Tensor& x) const;

  /// The same layer with its codes and scales on gpu.
  Int8Linear to(const gizhw::gpu::Gpu& gpu) const;

  int64_t inputs() const { return in_; }

 private:
  Int8Linear() = default;
  int64_t in_ = 0;
  tensor::Tensor codes_;   // [padded in, out] I8: the rotated weight's codes, transposed
  tensor::Tensor scales_;  // [1, out] F32: max |rotated row| / 127 per output channel
};

}  // namespace gizml::diffusion
