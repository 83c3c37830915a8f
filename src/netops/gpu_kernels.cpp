// Launches of netops' GPU kernels: a half warp (16 lanes) per row, 256 threads a block.
#include "netops/gpu_kernels.h"

#include "gpu/codegen.h"
#include "gpu/tensor_ops.h"

namespace gizml::netops::detail {
namespace {

constexpr int64_t kRowsPerBlock = 16;  // 256 threads, 16 lanes a row

template <class... Args>
void launch(const Tensor& on, const char* name, int64_t rows, Args... args) {
  const gizhw::gpu::Gpu gpu(on.storage()->gpu());
  void* params[] = {static_cast<void*>(&args)...};
  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  gpu.kernel(gizhw::gpu::netopsKernelSource(), name)
      .launch({blocks, 1, 1}, {static_cast<unsigned>(kRowsPerBlock * 16), 1, 1}, 0, gpu.stream(), params);
}

}  // namespace

Tensor crossEntropyRowsGpu(const Tensor& logits, const std::vector<int64_t>& labels) {
  const int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  const auto device = logits.storage()->gpu();
  Tensor loss = gpuops::empty({rows}, DType::F32, device);
  if (rows == 0) return loss;
  const Tensor ids = T::tensor({rows}, std::vector<double>(labels.begin(), labels.end()), DType::I64).on(gizhw::gpu::Gpu(device));
  launch(logits, "gz_netops_ce_rows", rows, gpuops::address(logits), gpuops::address(ids), gpuops::address(loss), rows,
         classes);
  return loss;
}

Tensor attentionGpu(const Tensor& q, const Tensor& k, const Tensor& v, float scale, bool causal, float rate, float keep,
                    const Key& key) {
  const int64_t batch = q.shape()[0], tq = q.shape()[1], d = q.shape()[2], tk = k.shape()[1], e = v.shape()[2];
  Tensor out = gpuops::empty({batch, tq, e}, DType::F32, q.storage()->gpu());
  if (batch * tq == 0 || e == 0) return out;
  launch(q, "gz_netops_attention", batch * tq, gpuops::address(q), gpuops::address(k), gpuops::address(v),
         gpuops::address(out), batch, tq, tk, d, e, scale, static_cast<int>(causal), rate, keep, key.seed);
  return out;
}

}  // namespace gizml::netops::detail
