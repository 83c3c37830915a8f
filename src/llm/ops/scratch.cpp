#include "llm/ops/scratch.h"

#include <array>
#include <memory>

#include "tensor/gpu/tensor_ops.h"

namespace gizml::llm::ops {

tensor::Tensor scratch(Scratch use, int64_t rows, int64_t width, const tensor::Tensor& like) {
  // One buffer a use in host memory and one on the GPU the calling thread last used.
  thread_local std::array<std::shared_ptr<tensor::Storage>, static_cast<size_t>(Scratch::Count)> host, gpu;
  const bool onGpu = like.onGpu();
  std::shared_ptr<tensor::Storage>& b = (onGpu ? gpu : host)[static_cast<size_t>(use)];
  const auto bytes = static_cast<size_t>(rows * width) * sizeof(float);
  const bool fits = b && b->bytes() >= bytes && (!onGpu || b->gpu() == like.storage()->gpu());
  if (!fits)
    b = onGpu ? gpuops::empty({rows, width}, DType::F32, like.storage()->gpu()).storage()
              : std::make_shared<tensor::Storage>(bytes);
  return tensor::Tensor(b, DType::F32, {rows, width}, {width, 1}, 0);
}

}  // namespace gizml::llm::ops
