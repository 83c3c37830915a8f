// Launches of netops' GPU kernels, 256 threads a block: a half warp (16 lanes) a row for the
// softmax rows and attention, a thread a row (or column, or element) for the rest.
#include "netops/gpu_kernels.h"

#include "netops/kernel_sources.h"
#include "tensor/gpu/tensor_ops.h"

namespace gizml::netops::detail {
namespace {

constexpr int64_t kThreads = 256;
constexpr int64_t kHalfWarp = 16;

template <class... Args>
void launch(const Tensor& on, const char* name, int64_t threads, Args... args) {
  const gizhw::gpu::Gpu gpu(on.storage()->gpu());
  void* params[] = {static_cast<void*>(&args)...};
  const unsigned blocks = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
  gpu.staticKernel(netopsKernelSource(), name)
      .launch({blocks, 1, 1}, {static_cast<unsigned>(kThreads), 1, 1}, 0, gpu.stream(), params);
}

Tensor emptyLike(const Tensor& on, const tensor::Shape& shape) {
  return gpuops::empty(shape, DType::F32, on.storage()->gpu());
}

// The labels as an I64 tensor on the logits' GPU (kept alive by the stream-ordered allocator
// until the kernel that reads them has run).
Tensor labelsOn(const Tensor& logits, const std::vector<int64_t>& labels) {
  const int64_t rows = static_cast<int64_t>(labels.size());
  return T::tensor({rows}, std::vector<double>(labels.begin(), labels.end()), DType::I64)
      .on(gizhw::gpu::Gpu(logits.storage()->gpu()));
}

}  // namespace

Tensor crossEntropyRowsGpu(const Tensor& logits, const std::vector<int64_t>& labels) {
  const int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  Tensor loss = emptyLike(logits, {rows});
  if (rows == 0) return loss;
  const Tensor ids = labelsOn(logits, labels);
  launch(logits, "gz_netops_ce_rows", rows * kHalfWarp, gpuops::address(logits), gpuops::address(ids),
         gpuops::address(loss), rows, classes);
  return loss;
}

Tensor crossEntropyGradGpu(const Tensor& logits, const std::vector<int64_t>& labels, float scale) {
  const int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  Tensor grad = emptyLike(logits, {rows, classes});
  if (rows == 0) return grad;
  const Tensor ids = labelsOn(logits, labels);
  launch(logits, "gz_netops_ce_grad", rows * kHalfWarp, gpuops::address(logits), gpuops::address(ids),
         gpuops::address(grad), rows, classes, scale);
  return grad;
}

Tensor attentionGpu(const Tensor& q, const Tensor& k, const Tensor& v, float scale, bool causal, float rate, float keep,
                    const Key& key) {
  const int64_t batch = q.shape()[0], tq = q.shape()[1], d = q.shape()[2], tk = k.shape()[1], e = v.shape()[2];
  Tensor out = emptyLike(q, {batch, tq, e});
  if (batch * tq == 0 || e == 0) return out;
  launch(q, "gz_netops_attention", batch * tq * kHalfWarp, gpuops::address(q), gpuops::address(k), gpuops::address(v),
         gpuops::address(out), batch, tq, tk, d, e, scale, static_cast<int>(causal), rate, keep, key.seed);
  return out;
}

std::vector<Tensor> layerNormGpu(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  const int64_t width = x.shape().back(), rows = x.numel() / width;
  const tensor::Shape rowShape(x.shape().begin(), x.shape().end() - 1);
  Tensor y = emptyLike(x, x.shape()), mean = emptyLike(x, rowShape), rstd = emptyLike(x, rowShape);
  if (rows > 0)
    launch(x, "gz_netops_layer_norm", rows, gpuops::address(x), gpuops::address(weight), gpuops::address(bias),
           gpuops::address(y), gpuops::address(mean), gpuops::address(rstd), rows, width, eps);
  return {y, mean, rstd};
}

std::vector<Tensor> layerNormGradGpu(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                     const Tensor& rstd) {
  const int64_t width = x.shape().back(), rows = x.numel() / width;
  Tensor dx = emptyLike(x, x.shape()), xhat = emptyLike(x, x.shape());
  Tensor dweight = emptyLike(x, {width}), dbias = emptyLike(x, {width});
  if (rows > 0)
    launch(x, "gz_netops_layer_norm_dx", rows, gpuops::address(dy), gpuops::address(x), gpuops::address(weight),
           gpuops::address(mean), gpuops::address(rstd), gpuops::address(dx), gpuops::address(xhat), rows, width);
  launch(x, "gz_netops_layer_norm_dw", width, gpuops::address(dy), gpuops::address(xhat), gpuops::address(dweight),
         gpuops::address(dbias), rows, width);
  return {dx, dweight, dbias};
}

Tensor dropoutGpu(const Tensor& x, const Key& key, float p, float keep) {
  Tensor y = emptyLike(x, x.shape());
  if (x.numel() > 0)
    launch(x, "gz_netops_dropout", x.numel(), gpuops::address(x), gpuops::address(y), x.numel(), p, keep, key.seed);
  return y;
}

}  // namespace gizml::netops::detail
