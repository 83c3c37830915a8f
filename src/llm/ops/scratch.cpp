#include "llm/ops/scratch.h"

#include <array>
#include <map>
#include <memory>

#include "tensor/gpu/tensor_ops.h"

namespace gizml::llm::ops {

tensor::Tensor scratch(Scratch use, int64_t rows, int64_t width, const tensor::Tensor& like) {
  // One buffer a use in host memory and one on each GPU the calling thread uses (a model in
  // stages runs layers on several in each pass).
  using Buffers = std::array<std::shared_ptr<tensor::Storage>, static_cast<size_t>(Scratch::Count)>;
  thread_local Buffers host;
  thread_local std::map<const void*, Buffers> gpus;
  const bool onGpu = like.onGpu();
  std::shared_ptr<tensor::Storage>& b = (onGpu ? gpus[like.storage()->gpu().get()] : host)[static_cast<size_t>(use)];
  const auto bytes = static_cast<size_t>(rows * width) * sizeof(float);
  const bool fits = b && b->bytes() >= bytes && (!onGpu || b->gpu() == like.storage()->gpu());
  if (!fits)
    b = onGpu ? gpuops::empty({rows, width}, DType::F32, like.storage()->gpu()).storage()
              : std::make_shared<tensor::Storage>(bytes);
  return tensor::Tensor(b, DType::F32, {rows, width}, {width, 1}, 0);
}

}  // namespace gizml::llm::ops
