#pragma once
// Where an operation of llm/ops finds its operands' memory. Each operation runs where its
// operands are: the CPU implementations are in src/cpu/, the GPU ones in llm/ops/gpu/. A GPU
// operand of a CPU-only path gives an Error naming the operation, never a read of device memory.
#include <gizhw/gpu.h>
#include <gizml/error.h>
#include <gizml/tensor.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace gizml::llm::ops {

/// Throws Error(message()) unless `condition`. The message is built only then: these checks run
/// on every operation of every layer of every step.
template <class Message>
void require(bool condition, const Message& message) {
  if (!condition) [[unlikely]]
    throw Error(std::string(message()));
}

/// Whether the operands (those with elements) are on a GPU: false when all are in host memory, true
/// when all are on one GPU, else an Error naming `op` and both devices.
bool onGpu(const char* op, std::initializer_list<const tensor::Tensor*> operands);
bool onGpu(const char* op, const std::vector<const tensor::Tensor*>& operands);

/// A forward pass begins on the calling thread: the small host arrays its operations copy to a
/// GPU once a pass (page tables, positions, DeltaNet runs) are copied afresh, not taken from an
/// earlier pass, so every pass of a shape makes the same copies (a recorded decode step replays
/// them: gizhw::gpu::StepGraph).
void beginPass();

/// An F32 tensor of `shape` (contents unspecified) on `gpu`, or in host memory (nullopt).
tensor::Tensor emptyOn(const std::optional<gizhw::gpu::Gpu>& gpu, const tensor::Shape& shape);

/// An F32 tensor of `shape` (contents unspecified) where `like` is: in host memory or on its GPU.
tensor::Tensor emptyLike(const tensor::Shape& shape, const tensor::Tensor& like);

/// F32 and contiguous, else an Error naming `op`.
void checkF32Rows(const char* op, const tensor::Tensor& t);

/// The host address of t's first element: t must be F32, contiguous and in host memory, else an
/// Error naming `op` and what is wrong.
float* hostF32(const char* op, const tensor::Tensor& t);

}  // namespace gizml::llm::ops
