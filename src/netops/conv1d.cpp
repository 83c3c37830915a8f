// 1-D convolutions, time first: conv1d is im2col1d then one product with w; convTranspose1d is
// one product with w then col2im1d (the adjoint), each plus the bias. On a GPU the same
// decomposition: the patch kernels of conv_gpu.cpp and the GPU matmul (gz_matmul_f32, which adds
// in the CPU sgemm's order), then the bias as one elementwise add.
#include "netops/conv_gpu.h"
#include "netops/operand.h"
#include "netops/product.h"
#include "netops/windows.h"
#include "tensor/gpu/tensor_ops.h"

namespace gizml::netops {
namespace {

// The bias [o] as contiguous F32 where the operands are (gpu), or null when none is given.
const Tensor* checkedBias(const char* fn, const std::vector<Tensor>& bias, int64_t outChannels, bool gpu,
                          Tensor& storage) {
  check(bias.size() <= 1, detail::where(fn) + "bias holds " + std::to_string(bias.size()) + " tensors, at most 1");
  if (bias.empty()) return nullptr;
  storage = detail::f32Operand(fn, "bias", bias[0], gpu);
  detail::requireShape(fn, "bias", storage, {outChannels});
  return &storage;
}

}  // namespace

Tensor conv1d(const Tensor& xIn, const Tensor& wIn, const std::vector<Tensor>& bias, int64_t stride, int64_t pad,
              int64_t dilation) {
  const char* fn = "conv1d";
  const Tensor* biasOrX = bias.empty() ? &xIn : &bias[0];  // no bias: x stands in
  const bool gpu = gpuops::deviceOf(std::string("netops::") + fn, {&xIn, &wIn, biasOrX}) != nullptr;
  const Tensor x = detail::f32Operand(fn, "x", xIn, gpu), w = detail::f32Operand(fn, "w", wIn, gpu);
  detail::requireRank(fn, "x", x, 2, "[t, c]");
  detail::requireRank(fn, "w", w, 3, "[o, c, k]");
  const int64_t o = w.shape()[0], c = w.shape()[1], k = w.shape()[2];
  check(x.shape()[1] == c, detail::where(fn) + "w of shape " + tensor::shapeText(w.shape()) +
                               " does not match x of shape " + tensor::shapeText(x.shape()) + " (channels)");
  detail::windowCount(fn, "k", x.shape()[0], k, stride, pad, dilation);
  Tensor biasStorage;
  const Tensor* b = checkedBias(fn, bias, o, gpu, biasStorage);
  const Tensor cols = im2col1d(x, k, stride, pad, dilation);
  if (!gpu) return detail::productPlusBias(cols, w.reshape({o, c * k}), b);
  // cols times w [o, c k] transposed (a view), as productPlusBias reads w.
  const Tensor y = cols.matmul(w.reshape({o, c * k}).transpose(0, 1));
  return b ? y.add(*b) : y;
}

Tensor convTranspose1d(const Tensor& xIn, const Tensor& wIn, const std::vector<Tensor>& bias, int64_t stride,
                       int64_t pad) {
  const char* fn = "convTranspose1d";
  const Tensor* biasOrX = bias.empty() ? &xIn : &bias[0];  // no bias: x stands in
  const bool gpu = gpuops::deviceOf(std::string("netops::") + fn, {&xIn, &wIn, biasOrX}) != nullptr;
  const Tensor x = detail::f32Operand(fn, "x", xIn, gpu), w = detail::f32Operand(fn, "w", wIn, gpu);
  detail::requireRank(fn, "x", x, 2, "[n, c]");
  detail::requireRank(fn, "w", w, 3, "[c, o, k]");
  const int64_t c = w.shape()[0], o = w.shape()[1], k = w.shape()[2];
  check(x.shape()[1] == c, detail::where(fn) + "w of shape " + tensor::shapeText(w.shape()) +
                               " does not match x of shape " + tensor::shapeText(x.shape()) + " (channels)");
  detail::requireAtLeast(fn, "k", k, 1);
  detail::requireAtLeast(fn, "stride", stride, 1);
  detail::requireAtLeast(fn, "pad", pad, 0);
  const int64_t n = x.shape()[0], length = (n - 1) * stride - 2 * pad + k;
  check(n >= 1 && length >= 1, detail::where(fn) + "pad = " + std::to_string(pad) + " leaves no output from " +
                                   std::to_string(n) + " inputs");
  Tensor biasStorage;
  const Tensor* b = checkedBias(fn, bias, o, gpu, biasStorage);
  // cols[i, oc k + j] = sum over ch of x[i, ch] w[ch, oc, j]: x times w [c, o k].
  const Tensor cols = x.matmul(w.reshape({c, o * k}));
  Tensor y = col2im1d(cols, o, length, k, stride, pad);
  if (gpu) return b ? y.add(*b) : y;
  if (b) {
    float* py = y.data<float>();
    const float* pb = b->data<float>();
    for (int64_t t = 0; t < length; ++t)
      for (int64_t oc = 0; oc < o; ++oc) py[t * o + oc] += pb[oc];
  }
  return y;
}

}  // namespace gizml::netops
