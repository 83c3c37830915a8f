#pragma once
// gizml::diffusion: the model-free parts of diffusion sampling as ComfyUI runs them: the initial
// noise from a seed.
#include <gizml/tensor.h>

#include <cstdint>

namespace gizml::diffusion {

/// ComfyUI's initial latent noise, bit for bit: what
/// `torch.randn(shape, dtype=torch.float32, generator=torch.manual_seed(seed), device="cpu")`
/// returns on an x86 CPU with AVX2 (torch's vectorised kernel, also taken on AVX-512 machines).
/// torch seeds its mt19937 with the seed's low 32 bits. A contiguous F32 CPU tensor; the same
/// bits on every CPU and build. A negative dimension is an Error.
tensor::Tensor torchRandn(uint64_t seed, const tensor::Shape& shape);

}  // namespace gizml::diffusion
