#pragma once
// gizml::diffusion: the model-free parts of diffusion sampling as ComfyUI runs them: the initial
// noise from a seed, the flow-matching sigma schedule and the res_multistep sampler.
#include <gizml/tensor.h>

#include <cstdint>
#include <vector>

namespace gizml::diffusion {

/// ComfyUI's initial latent noise, bit for bit: what
/// `torch.randn(shape, dtype=torch.float32, generator=torch.manual_seed(seed), device="cpu")`
/// returns on an x86 CPU with AVX2 (torch's vectorised kernel, also taken on AVX-512 machines).
/// torch seeds its mt19937 with the seed's low 32 bits. A contiguous F32 CPU tensor; the same
/// bits on every CPU and build. A negative dimension is an Error.
tensor::Tensor torchRandn(uint64_t seed, const tensor::Shape& shape);

/// The sigmas of ComfyUI's ModelSamplingAuraFlow(shift) (a discrete flow schedule of 1000
/// steps, sigma(t) = shift t / (1 + (shift - 1) t), in float32) with the `simple` scheduler:
/// steps + 1 values from the largest down, the last 0. steps must be 1..1000 and shift > 0.
std::vector<float> flowSigmas(int64_t steps, double shift = 3.0);

/// ComfyUI's res_multistep sampler (eta 0, no CFG++), one step at a time: the pipeline asks the
/// model for the denoised latent at sigmas[i] and hands it to step(i, x, denoised), which
/// returns the latent at sigmas[i + 1]. Steps must come in order 0, 1, ...; the first and the
/// last (to sigma 0) are Euler steps, the others second-order multistep ones using the previous
/// step's denoised latent. Scalars are computed in float32 and each tensor operation rounds to
/// float32, in ComfyUI's order; x and denoised are F32 tensors of one shape on one device.
class ResMultistep {
 public:
  /// sigmas: at least two, decreasing, positive but for the last, which may be 0.
  explicit ResMultistep(std::vector<float> sigmas);

  tensor::Tensor step(int64_t i, const tensor::Tensor& x, const tensor::Tensor& denoised);

  /// The number of steps: sigmas().size() - 1.
  int64_t steps() const { return static_cast<int64_t>(sigmas_.size()) - 1; }
  const std::vector<float>& sigmas() const { return sigmas_; }

 private:
  std::vector<float> sigmas_;
  int64_t next_ = 0;          // the step expected next
  tensor::Tensor previous_;   // the denoised latent of step next_ - 1
};

}  // namespace gizml::diffusion
