#include "llm/ops/scratch.h"

#include <array>
#include <memory>

namespace gizml::llm::ops {

tensor::Tensor scratch(Scratch use, int64_t rows, int64_t width) {
  thread_local std::array<std::shared_ptr<tensor::Storage>, static_cast<size_t>(Scratch::Count)> buffers;
  std::shared_ptr<tensor::Storage>& b = buffers[static_cast<size_t>(use)];
  const auto bytes = static_cast<size_t>(rows * width) * sizeof(float);
  if (!b || b->bytes() < bytes) b = std::make_shared<tensor::Storage>(bytes);
  return tensor::Tensor(b, DType::F32, {rows, width}, {width, 1}, 0);
}

}  // namespace gizml::llm::ops
