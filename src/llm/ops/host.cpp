#include "llm/ops/host.h"

#include <gizml/error.h>

#include <string>

namespace gizml::llm::ops {

float* hostF32(const char* op, const tensor::Tensor& t) {
  // Checked on every operation of every layer: the messages are built only when one fails.
  if (t.onGpu()) [[unlikely]]
    throw Error(std::string(op) + ": an operand is on " + t.device() +
                "; the language-model operations have only their CPU implementations so far");
  if (t.dtype() != DType::F32) [[unlikely]]
    throw Error(std::string(op) + ": F32 rows expected, not " + dtypeName(t.dtype()));
  if (!t.isContiguous()) [[unlikely]]
    throw Error(std::string(op) + ": contiguous rows expected, not a strided view " + tensor::shapeText(t.shape()));
  return t.data<float>();
}

}  // namespace gizml::llm::ops
