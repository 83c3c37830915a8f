// The spec's Tensor.argmax and Tensor.dropout as free functions.
#include <cmath>

#include "core/thread_pool.h"
#include "cpu/reduce.h"
#include "netops/gpu_kernels.h"
#include "netops/norm_gpu.h"
#include "netops/operand.h"
#include "tensor/random.h"

namespace gizml::netops {

std::vector<int64_t> argmax(const Tensor& xIn) {
  // On a GPU: argmaxInto's kernel (gz_nr_argmax: the same rule), a block a row.
  const Tensor x = (xIn.onGpu() ? detail::floatOperand : detail::hostF32)("argmax", "x", xIn);
  check(x.ndim() >= 1 && x.shape().back() > 0,
        detail::where("argmax") + "x of shape " + tensor::shapeText(x.shape()) + " has no rows to search");
  if (x.onGpu()) return normgpu::argmax(x);
  const int64_t width = x.shape().back(), rows = x.numel() / width;
  std::vector<int64_t> best(static_cast<size_t>(rows));
  const float* px = x.data<float>();
  core::parallelFor(rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) best[static_cast<size_t>(r)] = cpu::argmaxF32(px + r * width, width);
  });
  return best;
}

Tensor dropout(const Tensor& xIn, const Key& key, double p) {
  check(p >= 0.0 && p < 1.0, detail::where("dropout") + "p = " + std::to_string(p) + " is outside [0, 1)");
  if (xIn.dtype() == DType::F64) {  // the same mask; x times 1 / (1 - p) in f64
    const Tensor x = detail::hostF64("dropout", "x", xIn);
    const double keep = 1.0 / (1.0 - p);
    const float dropBelow = static_cast<float>(p);
    Tensor y = tensor::empty(x.shape(), DType::F64);
    const double* px = x.data<double>();
    double* py = y.data<double>();
    core::parallelFor(x.numel(), 16384, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        py[i] = tensor::uniformWord(key, static_cast<uint64_t>(i)) >= dropBelow ? px[i] * keep : 0.0;
    });
    return y;
  }
  const Tensor x = detail::floatOperand("dropout", "x", xIn);
  const float keep = static_cast<float>(1.0 / (1.0 - p)), dropBelow = static_cast<float>(p);
  if (x.onGpu()) {
    const Tensor y = detail::dropoutGpu(x, key, dropBelow, keep);
    return xIn.dtype() == DType::F32 ? y : y.cast(xIn.dtype());
  }
  Tensor y = tensor::empty(x.shape());
  const float* px = x.data<float>();
  float* py = y.data<float>();
  core::parallelFor(x.numel(), 16384, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      py[i] = tensor::uniformWord(key, static_cast<uint64_t>(i)) >= dropBelow ? px[i] * keep : 0.0f;
  });
  return xIn.dtype() == DType::F32 ? y : y.cast(xIn.dtype());
}

}  // namespace gizml::netops
