#include "llm/ops/host.h"

#include <gizml/error.h>

#include <string>

#include "llm/ops/gpu/model_ops_gpu.h"
#include "tensor/gpu/tensor_ops.h"

namespace gizml::llm::ops {

namespace {

template <class Operands>
bool allOnGpu(const char* op, const Operands& operands) {
  const tensor::Tensor* first = nullptr;  // the first operand with elements
  bool gpu = false;
  for (const tensor::Tensor* t : operands) {
    if (t->ndim() == 0) continue;  // an absent operand (no bias)
    if (!first) {
      first = t;
      gpu = t->onGpu();
    } else if (t->onGpu() != gpu || (gpu && t->storage()->gpu() != first->storage()->gpu())) [[unlikely]] {
      throw Error(std::string(op) + ": operands on two devices, " + first->device() + " and " + t->device());
    }
  }
  return gpu;
}

}  // namespace

bool onGpu(const char* op, std::initializer_list<const tensor::Tensor*> operands) { return allOnGpu(op, operands); }

bool onGpu(const char* op, const std::vector<const tensor::Tensor*>& operands) { return allOnGpu(op, operands); }

void beginPass() { gpu::beginPass(); }

tensor::Tensor emptyOn(const std::optional<gizhw::gpu::Gpu>& gpu, const tensor::Shape& shape) {
  return gpu ? gpuops::empty(shape, DType::F32, gpu->device()) : tensor::empty(shape);
}

tensor::Tensor emptyLike(const tensor::Shape& shape, const tensor::Tensor& like) {
  return like.onGpu() ? gpuops::empty(shape, DType::F32, like.storage()->gpu()) : tensor::empty(shape);
}

void checkF32Rows(const char* op, const tensor::Tensor& t) {
  if (t.dtype() != DType::F32) [[unlikely]]
    throw Error(std::string(op) + ": F32 rows expected, not " + dtypeName(t.dtype()));
  if (!t.isContiguous()) [[unlikely]]
    throw Error(std::string(op) + ": contiguous rows expected, not a strided view " + tensor::shapeText(t.shape()));
}

float* hostF32(const char* op, const tensor::Tensor& t) {
  // Checked on every operation of every layer: the messages are built only when one fails.
  if (t.onGpu()) [[unlikely]]
    throw Error(std::string(op) + ": an operand is on " + t.device() + "; " + op +
                " has only its CPU implementation so far");
  checkF32Rows(op, t);
  return t.data<float>();
}

}  // namespace gizml::llm::ops
