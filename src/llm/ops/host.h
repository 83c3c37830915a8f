#pragma once
// Where an operation of llm/ops finds its operands' memory. Each operation runs where its
// operands are; the CPU implementations are in src/cpu/. Language-model operations on a GPU
// are not written yet (the models load on the CPU): a GPU operand is an Error naming the
// operation, never a read of device memory.
#include <gizml/error.h>
#include <gizml/tensor.h>

#include <string>

namespace gizml::llm::ops {

/// Throws Error(message()) unless `condition`. The message is built only then: these checks run
/// on every operation of every layer of every step.
template <class Message>
void require(bool condition, const Message& message) {
  if (!condition) [[unlikely]]
    throw Error(std::string(message()));
}

/// The host address of t's first element: t must be F32, contiguous and in host memory, else an
/// Error naming `op` and what is wrong.
float* hostF32(const char* op, const tensor::Tensor& t);

}  // namespace gizml::llm::ops
