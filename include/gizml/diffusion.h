#pragma once
// gizml::diffusion: the model-free parts of diffusion sampling as ComfyUI runs them (the initial
// noise from a seed, the flow-matching sigma schedule and the res_multistep sampler), FLUX.1's
// VAE decoder, Z-Image's DiT and the Z-Image Turbo pipeline (text encoder, DiT and VAE).
#include <gizml/image.h>
#include <gizml/llm.h>
#include <gizml/tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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
  /// On a GPU (a decoder from `to`): computed there, the pixels F32 on that GPU.
  tensor::Tensor decode(const tensor::Tensor& latents) const;

  /// The same decoder with its weights copied to gpu, whose decode runs there.
  FluxVae to(const gizhw::gpu::Gpu& gpu) const;

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
  /// The blocks' attention (qkv, out) and feed-forward (w1, w2, w3) linears, nearly all of the
  /// DiT's products: F32, the reference, or ConvRot's W8A8 (weights rotated by the Hadamard
  /// matrix of 256 and quantized to INT8 per output channel as they load, activations through
  /// netops::int8Rows, the codes multiplied exactly in integers). The embedders, modulations and
  /// final layer stay F32. F32 is the default: on the CPU the integer product is a plain exact
  /// one, slower than F32's sgemm.
  enum class Linears { F32, Int8 };
  Linears linears = Linears::F32;
};

/// Z-Image's single-stream DiT (ComfyUI comfy/ldm/lumina/model.py NextDiT with Z-Image's
/// settings; diffusers ZImageTransformer2DModel), in F32 (its block linears F32 or INT8) on the
/// CPU or, after `to`, a GPU, one latent at a time.
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
  /// On a GPU (a DiT from `to`): its tensor operations there, the result [1, channels(), h, w]
  /// F32 on that GPU, latent and caption copied there first.
  tensor::Tensor forward(const tensor::Tensor& latent, double sigma, const tensor::Tensor& caption) const;

  /// The same DiT with its weights (F32, or INT8 codes and scales) copied to gpu, whose forward
  /// runs there.
  ZImageDit to(const gizhw::gpu::Gpu& gpu) const;

  int64_t channels() const;
  int64_t captionDim() const;
  int64_t dim() const;

  struct Weights;

 private:
  std::shared_ptr<const Weights> weights_;
};

/// Z-Image's text encoder from Qwen3-4B (a Hugging Face folder or a GGUF file): converted with
/// gizml::llm into destination keeping the embedding and all but the last layer (Z-Image reads
/// hidden_states[-2]: the first 35 of 36 layers), without the final norm and the output layer.
/// The layers are stored at 16 bits (F16; llm::convert's choice of BF16 for a tensor beyond F16's
/// range): the states feed the DiT directly, with no sampling to absorb errors, and 16 bits keep
/// them within rounding of ComfyUI's BF16 encoder, where 8 or 4 bits would shift them (about 0.5 %
/// or 7 % RMS a weight). Qwen3-4B's 35 layers take about 7.5 GB. A source that is not a Qwen3
/// model, or has fewer than 2 layers, is a gizml::Error naming it.
llm::ConvertReport convertZImageText(const std::string& source, const std::string& destination);

/// What ZImagePipeline takes besides its files. The defaults are Z-Image Turbo's in ComfyUI.
struct ZImagePipelineConfig {
  ZImageConfig dit;
  int64_t steps = 8;   // res_multistep steps
  double shift = 3.0;  // ModelSamplingAuraFlow's shift of the flow schedule
  /// Where the DiT and the VAE run (ZImageDit::to, FluxVae::to): the noise and the latents on that
  /// GPU then, sampleWith's result and the steps' latents too. The text encoder stays on the host.
  /// None: the host.
  std::optional<gizhw::gpu::Gpu> gpu;
};

/// Where sampling is, told after each step.
struct ZImageStep {
  int64_t step = 0;  // the step just done, 0-based
  int64_t steps = 0;
  float sigma = 0;   // the noise level the step started from
  double seconds = 0;  // the step's time
  tensor::Tensor latent;  // the latent after the step (for previews; the sampler's own, not a copy)
};

/// The seconds paint spent in each stage.
struct ZImageTimes {
  double condition = 0, sample = 0, decode = 0;
};

/// Z-Image Turbo from prompt to picture on the CPU in F32, as ComfyUI runs it (cfg 1, one
/// prompt): condition (the prompt in Qwen3's chat form through the text encoder), sampleWith
/// (ComfyUI's noise for the seed, res_multistep over the flow schedule, the DiT as denoiser) and
/// decode (FLUX.1's VAE and ComfyUI's SaveImage bytes). The calls keep no state between them
/// (each condition reads the prompt in an engine of its own); copies share the loaded weights.
class ZImagePipeline {
 public:
  /// ditPath: ComfyUI's Z-Image file (ZImageDit::load); textFolder: convertZImageText's output;
  /// vaePath: BFL's FLUX.1 ae.safetensors (FluxVae::load). A missing or bad file is a gizml::Error
  /// naming it; so are a text encoder whose width is not the DiT's caption width and a VAE whose
  /// latent channels are not the DiT's (both files named).
  static ZImagePipeline load(const std::string& ditPath, const std::string& textFolder, const std::string& vaePath,
                             const ZImagePipelineConfig& config = {});

  /// The token ids the text encoder reads for prompt: ComfyUI's ZImageTokenizer text
  /// "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n" (which is diffusers'
  /// chat template with enable_thinking, so no think block), tokenized whole, nothing added or
  /// padded. ComfyUI's prompt syntax (embedding:NAME, the \( escapes) is not read.
  std::vector<llm::TokenId> promptTokens(const std::string& prompt) const;
  /// The caption the DiT reads: the encoder's hidden states after its layers (no final norm) at
  /// every prompt token, F32 [tokens, captionDim()]. A prompt longer than the encoder's context
  /// is an Error.
  tensor::Tensor condition(const std::string& prompt) const;
  /// The latent of an image of width x height (multiples of 16 for Z-Image: the VAE's upscale
  /// times the DiT's patch; else an Error) from the seed's noise, torchRandn(seed, [1, channels,
  /// height / 8, width / 8]), after the configured steps of ResMultistep over flowSigmas, the
  /// denoised latent at each sigma being latent - sigma ZImageDit::forward. onStep, when set, is
  /// called after every step. [1, channels, height / 8, width / 8] F32.
  tensor::Tensor sampleWith(const tensor::Tensor& caption, uint64_t seed, int64_t width, int64_t height,
                            const std::function<void(const ZImageStep&)>& onStep = {}) const;
  /// The picture of a latent: FluxVae::decode, then ComfyUI's clamp((x + 1) / 2) and truncated
  /// uint8(255 x) (image::fromTensor with Range::MinusOneOne).
  image::Image decode(const tensor::Tensor& latent) const;
  /// condition, sampleWith and decode; times, when given, gets each stage's seconds.
  image::Image paint(const std::string& prompt, uint64_t seed, int64_t width, int64_t height,
                     const std::function<void(const ZImageStep&)>& onStep = {}, ZImageTimes* times = nullptr) const;

  /// Width and height must be multiples of this (16 for Z-Image).
  int64_t sizeMultiple() const;
  int64_t captionDim() const;
  const ZImagePipelineConfig& config() const;

  struct Parts;

 private:
  std::shared_ptr<const Parts> parts_;
};

}  // namespace gizml::diffusion
