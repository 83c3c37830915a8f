#pragma once
// gizml::diffusion: the model-free parts of diffusion sampling as ComfyUI runs them (the initial
// noise from a seed, the flow-matching sigma schedule and the res_multistep sampler), FLUX.1's
// VAE decoder and Z-Image's DiT.
#include <gizml/tensor.h>

#include <cstdint>
#include <memory>
#include <string>
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

/// FLUX.1's VAE decoder (black-forest-labs flux, src/flux/modules/autoencoder.py), which Z-Image
/// uses, on the CPU in F32: conv_in, the middle (a ResNet block, single-head attention over the
/// pixels, a ResNet block), the up levels from the deepest (ResNet blocks, then nearest x2 and a
/// 3 x 3 conv but for level 0), GroupNorm(32, eps 1e-6) + swish, conv_out. The channels, levels
/// and blocks come from the file's tensor shapes (FLUX.1's: 512 channels deep, 4 levels, 3
/// blocks each, 16 latent channels).
class FluxVae {
 public:
  /// BFL's latent scale and shift (AutoEncoder.decode: z / scale + shift).
  static constexpr double kScale = 0.3611;
  static constexpr double kShift = 0.1159;

  /// The `decoder.*` tensors of BFL's ae.safetensors (F32, F16 or BF16, computed in F32; the
  /// attention's 1 x 1 q, k, v and proj_out as convolutions [c, c, 1, 1] or linears [c, c]);
  /// other tensors (the encoder's) are ignored. A missing tensor, a wrong shape or dtype, a
  /// channel count that 32 groups do not divide or a `decoder.` tensor it does not use is a
  /// gizml::Error naming the file and the tensor.
  static FluxVae load(const std::string& path);

  /// latents [n, latentChannels(), h, w] (any float dtype) to pixels
  /// [n, outChannels(), upscale() h, upscale() w] F32 in about [-1, 1]; z / kScale + kShift first.
  tensor::Tensor decode(const tensor::Tensor& latents) const;

  int64_t latentChannels() const;
  int64_t outChannels() const;
  /// 2^(levels - 1): 8 for FLUX.1's.
  int64_t upscale() const;

  struct Weights;

 private:
  std::shared_ptr<const Weights> weights_;
};

/// What Z-Image's DiT file does not tell by its shapes. The defaults are Z-Image Turbo's.
struct ZImageConfig {
  int64_t patch = 2;                           // latent pixels a token covers, each way
  std::vector<int64_t> ropeAxes = {32, 48, 48};  // RoPE dims of (sequence, row, column); sum = head dim
  double ropeTheta = 256.0;
  double normEps = 1e-5;  // the RMSNorms' (the final LayerNorm's is 1e-6)
};

/// Z-Image's single-stream DiT (ComfyUI comfy/ldm/lumina/model.py NextDiT with Z-Image's
/// settings; diffusers ZImageTransformer2DModel), on the CPU in F32, one latent at a time.
/// The caption's tokens are embedded (RMSNorm, linear) and refined by the unmodulated
/// context_refiner blocks, the latent's 2 x 2 patches by the modulated noise_refiner blocks, each
/// padded to a multiple of 32 tokens with the learned pad token; then [caption, image] pass the
/// main layers and the final layer. Blocks: sandwich RMSNorms, q/k RMSNorm, 3-axis RoPE on
/// interleaved pairs (caption token i at (1 + i, 0, 0), image patch (Lcaption_padded + 1, row,
/// column), image pad tokens at (0, 0, 0)), SwiGLU; modulation by tanh gates and (1 + scale)
/// from the time embedding.
class ZImageDit {
 public:
  /// ComfyUI's single-file tensor names (`layers.N.attention.qkv.weight`, `x_embedder.weight`,
  /// ...; F32, F16 or BF16, computed in F32). The width, head dim (q_norm's size), layer
  /// counts, caption width, FFN and time-embedding widths come from the shapes. A missing tensor,
  /// a wrong shape or dtype, a head dim other than the sum of config.ropeAxes or a tensor it does
  /// not use is a gizml::Error naming the file and the tensor.
  static ZImageDit load(const std::string& path, const ZImageConfig& config = {});

  /// What ComfyUI's model returns for latent [1, channels(), h, w] (h, w multiples of patch)
  /// at noise level sigma with caption [tokens, captionDim()] (the text encoder's hidden states):
  /// minus the network's output, which is the flow velocity, so denoised = latent - sigma out.
  /// The network sees t = 1 - sigma (in float32), embedded as a sinusoid of 1000 t. [1, channels(),
  /// h, w] F32.
  tensor::Tensor forward(const tensor::Tensor& latent, double sigma, const tensor::Tensor& caption) const;

  int64_t channels() const;
  int64_t captionDim() const;
  int64_t dim() const;

  struct Weights;

 private:
  std::shared_ptr<const Weights> weights_;
};

}  // namespace gizml::diffusion
