// affine: x Wᵀ + b through cpu::sgemm (W read transposed in place), then the bias. On a GPU the
// tensor API's matmul in `compute` (F32: the CPU's fma chains, so the same bits; BF16/F16: tensor
// cores, rounded to that dtype) and the bias added in F32 by one elementwise kernel.
#include "core/thread_pool.h"
#include "cpu/gemm.h"
#include "netops/norm_gpu.h"
#include "netops/operand.h"
#include "netops/product.h"

namespace gizml::netops {

Tensor affine(const Tensor& xIn, const Tensor& wIn, const Tensor& bIn, DType compute) {
  const char* fn = "affine";
  check(isFloat(compute) && compute != DType::F64,
        detail::where(fn) + "compute dtype " + dtypeName(compute) + " is not F32, F16 or BF16");
  const bool onGpu = gpuops::deviceOf("netops::affine", {{"x", &xIn}, {"w", &wIn}, {"b", &bIn}}) != nullptr;
  // On a GPU x and w stay as given until cast to compute there (BF16 reaches the tensor cores as
  // it is); floatOperand's copies would only be dropped. b is added in F32.
  const auto operand = [&](const char* arg, const Tensor& t) {
    if (!onGpu) return detail::hostF32(fn, arg, t);
    check(isFloat(t.dtype()) && t.dtype() != DType::F64,
          detail::where(fn) + arg + " has dtype " + dtypeName(t.dtype()) + ", not F32, F16 or BF16");
    return t;
  };
  const Tensor x = operand("x", xIn), w = operand("w", wIn), b = operand("b", bIn);
  detail::requireRank(fn, "x", x, 2, "[rows, in]");
  detail::requireRank(fn, "w", w, 2, "[out, in]");
  check(w.shape()[1] == x.shape()[1], detail::where(fn) + "w of shape " + tensor::shapeText(w.shape()) +
                                          " does not match x of shape " + tensor::shapeText(x.shape()) + " (in)");
  detail::requireShape(fn, "b", b, {w.shape()[0]});
  if (onGpu) {
    const Tensor product = x.cast(compute).matmul(w.cast(compute).transpose(0, 1)).cast(DType::F32);
    return (tensor::lazy(product) + tensor::lazy(b.cast(DType::F32))).eval();
  }
  return detail::productPlusBias(x, w, &b);
}

namespace detail {

Tensor productPlusBias(const Tensor& x, const Tensor& w, const Tensor* bias) {
  const int64_t rows = x.shape()[0], in = x.shape()[1], out = w.shape()[0];
  Tensor y = tensor::empty({rows, out});
  float* py = y.data<float>();
  cpu::sgemm(rows, out, in, x.data<float>(), in, 1, w.data<float>(), 1, in, py, out, false);
  if (bias) {
    const float* pb = bias->data<float>();
    core::parallelFor(rows, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t o = 0; o < out; ++o) py[r * out + o] += pb[o];
    });
  }
  return y;
}

}  // namespace detail
}  // namespace gizml::netops
