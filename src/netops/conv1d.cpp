// 1-D convolutions, time first: conv1d is im2col1d then one product with w; convTranspose1d is
// one product with w then col2im1d (the adjoint), each plus the bias.
#include "netops/operand.h"
#include "netops/product.h"
#include "netops/windows.h"

namespace gizml::netops {
namespace {

// The bias [o] as contiguous F32, or null when none is given.
const Tensor* checkedBias(const char* fn, const std::vector<Tensor>& bias, int64_t outChannels, Tensor& storage) {
  check(bias.size() <= 1, detail::where(fn) + "bias holds " + std::to_string(bias.size()) + " tensors, at most 1");
  if (bias.empty()) return nullptr;
  storage = detail::hostF32(fn, "bias", bias[0]);
  detail::requireShape(fn, "bias", storage, {outChannels});
  return &storage;
}

}  // namespace

Tensor conv1d(const Tensor& xIn, const Tensor& wIn, const std::vector<Tensor>& bias, int64_t stride, int64_t pad,
              int64_t dilation) {
  const char* fn = "conv1d";
  const Tensor x = detail::hostF32(fn, "x", xIn), w = detail::hostF32(fn, "w", wIn);
  detail::requireRank(fn, "x", x, 2, "[t, c]");
  detail::requireRank(fn, "w", w, 3, "[o, c, k]");
  const int64_t o = w.shape()[0], c = w.shape()[1], k = w.shape()[2];
  check(x.shape()[1] == c, detail::where(fn) + "w of shape " + tensor::shapeText(w.shape()) +
                               " does not match x of shape " + tensor::shapeText(x.shape()) + " (channels)");
  detail::windowCount(fn, "k", x.shape()[0], k, stride, pad, dilation);
  Tensor biasStorage;
  const Tensor* b = checkedBias(fn, bias, o, biasStorage);
  const Tensor cols = im2col1d(x, k, stride, pad, dilation);
  return detail::productPlusBias(cols, w.reshape({o, c * k}), b);
}

Tensor convTranspose1d(const Tensor& xIn, const Tensor& wIn, const std::vector<Tensor>& bias, int64_t stride,
                       int64_t pad) {
  const char* fn = "convTranspose1d";
  const Tensor x = detail::hostF32(fn, "x", xIn), w = detail::hostF32(fn, "w", wIn);
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
  const Tensor* b = checkedBias(fn, bias, o, biasStorage);
  // cols[i, oc k + j] = sum over ch of x[i, ch] w[ch, oc, j]: x times w [c, o k].
  const Tensor cols = x.matmul(w.reshape({c, o * k}));
  Tensor y = col2im1d(cols, o, length, k, stride, pad);
  if (b) {
    float* py = y.data<float>();
    const float* pb = b->data<float>();
    for (int64_t t = 0; t < length; ++t)
      for (int64_t oc = 0; oc < o; ++oc) py[t * o + oc] += pb[oc];
  }
  return y;
}

}  // namespace gizml::netops
