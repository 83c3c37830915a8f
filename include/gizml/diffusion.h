#pragma once
// gizml::diffusion: the model-free parts of diffusion sampling as ComfyUI runs them (the initial
// noise from a seed, the flow-matching sigma schedules, the res_multistep and Euler samplers),
// Z-Image Turbo (DiT, FLUX.1's VAE decoder, the pipeline from text encoder to picture), klein's
// parts (the FLUX.2 / FLUX.3 DiT, FLUX.2's VAE both ways, the text rows) and MiniMax H3's (the
// transformer, the video and audio decoders).
#include <gizml/image.h>
#include <gizml/llm.h>
#include <gizml/tensor.h>
#include <gizml/vision.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace gizml::diffusion {

/// ComfyUI's initial latent noise, bit for bit: what
/// `torch.randn(shape, dtype=torch.float32, generator=torch.manual_seed(seed), device="cpu")`
/// returns on an x86 CPU with AVX2 (torch's vectorised kernel, also taken on AVX-512 machines).
/// torch seeds its mt19937 with the seed's low 32 bits. A contiguous F32 CPU tensor; the same
/// bits on every CPU and build. A negative dimension is an Error.
tensor::Tensor torchRandn(uint64_t seed, const tensor::Shape& shape);

/// torch's CPU generator drawn from again and again, as a pipeline that takes several noises from
/// one `torch.Generator().manual_seed(seed)` does (MiniMax H3: the video's, then the audio's):
/// each randn is what torch.randn(shape, generator=g) returns next, bit for bit, the mt19937's
/// state and torch's cached second normal of its double path carried from draw to draw.
/// TorchGenerator(seed).randn(shape) is torchRandn(seed, shape).
class TorchGenerator {
 public:
  explicit TorchGenerator(uint64_t seed);
  /// The next draw: a contiguous F32 CPU tensor of shape. A negative dimension is an Error.
  tensor::Tensor randn(const tensor::Shape& shape);

 private:
  std::mt19937 engine_;
  std::optional<double> nextNormal_;  // torch's next_double_normal_sample
};

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

  /// The `decoder.*` tensors of BFL's ae.safetensors, or of a file in diffusers' AutoencoderKL
  /// names (decoder.up_blocks.0...) (F32, F16 or BF16, computed in F32; the attention's 1 x 1 q,
  /// k, v and proj_out as convolutions [c, c, 1, 1] or linears [c, c]);
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
  /// ...; F32, F16, BF16 or FP8 (F8_E4M3, F8_E5M2: plain, or scaled per tensor as ComfyUI's
  /// fp8_scaled files are, `scale_weight` or `weight_scale` beside the weight, the value being the
  /// code times the scale), computed in F32). On the host the blocks' linears stay as stored (FP8
  /// as BF16) and become F32 at each use. The width, head dim (q_norm's size), layer
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
  /// When memory is short: hold the text encoder and the DiT only while they run. load checks
  /// each part by loading it and letting it go before the next; then each condition loads the
  /// text encoder and each sampleWith the DiT (and places it on the GPU) for that call, so that
  /// the two are never in memory together, at the price of reading their files every call. The
  /// pictures are the same.
  bool lowMemory = false;
};

/// Where sampling is, told after each step.
struct ZImageStep {
  int64_t step = 0;  // the step just done, 0-based
  int64_t steps = 0;
  float sigma = 0;   // the noise level the step started from
  double seconds = 0;  // the step's time
  tensor::Tensor latent;  // the latent after the step (for previews; the sampler's own, not a copy)
  bool cached = false;    // klein: the step cache skipped the step's joint blocks (KleinStepCache)
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

/// FLUX.2's VAE (diffusers AutoencoderKLFlux2; BFL's flux2 autoencoder), which FLUX.2 and FLUX.3
/// klein use, both ways, on the CPU in F32: FLUX.1's blocks (FluxVae) with 32 latent channels,
/// an encoder (conv_in, down levels of ResNet blocks each but the last ending in zeros padded
/// right and below and a 3 x 3 conv of stride 2, the middle, GroupNorm + swish, conv_out to the
/// posterior's mean and log variance), quant_conv and post_quant_conv (1 x 1), and the latents as
/// the klein pipeline reads them: 2 x 2 patches of the posterior's mean (channel 4 c + 2 dy + dx)
/// normalized by the file's BatchNorm statistics, (z - running_mean) / sqrt(running_var + 1e-4).
class Flux2Vae {
 public:
  /// batch_norm_eps of FLUX.2's VAE config (diffusers' default, which the klein pipelines read).
  static constexpr double kBatchNormEps = 1e-4;

  /// BFL's / ComfyUI's flux2-vae.safetensors (encoder.*, encoder.quant_conv, decoder.*,
  /// decoder.post_quant_conv, bn.running_mean/var) or diffusers' AutoencoderKLFlux2 in its names
  /// (a diffusion_pytorch_model.safetensors, or the folder holding it or a vae/ folder with it);
  /// F32, F16 or BF16, computed in F32. Sizes come from the shapes. A missing tensor, a wrong
  /// shape or dtype, a channel count that 32 groups do not divide or a tensor it does not use
  /// (bn.num_batches_tracked aside) is a gizml::Error naming the file and the tensor.
  static Flux2Vae load(const std::string& path);

  /// pixels [n, imageChannels(), H, W] (any float dtype, about [-1, 1]; H, W multiples of
  /// scale()) to the normalized patchified latents [n, latentChannels(), H / scale(),
  /// W / scale()] F32 (the posterior's mean: no sampling, as the pipelines encode references).
  /// On a GPU (a VAE from `to`): computed there, the latents F32 on that GPU.
  tensor::Tensor encode(const tensor::Tensor& pixels) const;
  /// latents [n, latentChannels(), h, w] (any float dtype) to pixels [n, imageChannels(),
  /// scale() h, scale() w] F32 in about [-1, 1]: the normalization undone, unpatchified,
  /// post_quant_conv, the decoder. On a GPU: computed there, the pixels F32 on that GPU.
  tensor::Tensor decode(const tensor::Tensor& latents) const;

  /// The same VAE with its weights copied to gpu, whose encode and decode run there.
  Flux2Vae to(const gizhw::gpu::Gpu& gpu) const;

  /// 4 z: 128 for FLUX.2's (z = 32).
  int64_t latentChannels() const;
  int64_t imageChannels() const;
  /// Image pixels a latent pixel covers each way: 2 x 2^(levels - 1), 16 for FLUX.2's.
  int64_t scale() const;

  struct Weights;

 private:
  std::shared_ptr<const Weights> weights_;
};

// ---- MiniMax H3's decoders (diffusers AutoencoderKLMiniMaxH3 and AutoencoderKLMiniMaxH3Audio) ----

/// What MiniMax H3's video decoder file does not tell by its shapes. The defaults are the released model's
/// (diffusers' MINIMAX_H3_VIDEO_VAE_CONFIG; the latent statistics of video_vae/config.json as
/// stable-diffusion.cpp's minimax_h3_vae.hpp carries them).
struct H3VideoConfig {
  int64_t headDim = 64;             // the ViT's attention head width (the heads: its width / headDim)
  int64_t patch = 16, patchT = 4;   // pixels a latent covers across and frames it covers in time
  double ropeTheta = 100.0, ropeRatio = 0.75;  // RoPE on the first ropeRatio headDim channels of a head
  double eps = 1e-5;                // the RMSNorms' and the final LayerNorm's
  int64_t clipLength = 17, tokenDrop = 3;  // the encoder's chunks: 17 frames, 3 trailing latents dropped
  /// Spatial tiles in pixels and their least overlap (released with tiling on: the released frames
  /// are the blended tiles'); 0: the whole frame at once.
  int64_t tile = 256, tileOverlap = 64;
  std::vector<float> latentsMean = {0.858090341091156f,  -0.960659146308899f, 1.066164016723633f,  -0.509032547473907f,
                                    -0.272758185863495f, -1.367541432380676f, -0.255325496196747f, -0.269075542688370f,
                                    -0.537684082984924f, -0.046409729868174f, 0.665737032890320f,  0.196901276707649f,
                                    -0.546060800552368f, -0.403534203767776f, -0.236830249428749f, 0.259284526109695f,
                                    -0.301339447498322f, 0.211341992020607f,  -1.120684862136841f, 0.358193337917328f,
                                    -0.042251437902451f, 0.260482996702194f,  0.228640928864479f,  0.705603182315826f};
  std::vector<float> latentsStd = {1.222377419471741f, 1.276726365089417f, 1.683177471160889f, 1.754945516586304f,
                                   1.563621640205383f, 2.194143533706665f, 0.965313792228699f, 1.056988596916199f,
                                   0.841948926448822f, 0.772995293140411f, 1.895593762397766f, 0.946841835975647f,
                                   0.799680948257446f, 0.449889004230499f, 0.719739973545075f, 0.693629324436188f,
                                   2.961095094680786f, 2.769419908523560f, 3.049618482589722f, 2.108805418014527f,
                                   3.276226282119751f, 3.162735700607300f, 2.281681299209595f, 2.612784385681153f};
};

/// MiniMax H3's video decoder (the spec's Decoder), on the CPU in F32: post_quant_conv (1 x 1 x 1), then a
/// non-causal ViT (every latent voxel a token, 4 learned register tokens and a zero token appended; blocks of
/// RMSNorm, attention with q/k RMSNorm and partial 3-axis RoPE on rotated halves, a SwiGLU feed-forward, each
/// scaled by a learned vector; LayerNorm and a projection to patchT x patch x patch pixels of 3 colours).
/// decode runs diffusers' AutoencoderKLMiniMaxH3.decode as released: chunks of 5 + 2 latent frames cross-faded
/// over 5 frames, each chunk in spatial tiles blended linearly (the whole clip at once would differ).
class H3VideoDecoder {
 public:
  /// The decoder side of the video VAE's file: the original checkpoint's names
  /// (video_vae/source/model.safetensors: decoder.x_embedder, per-head interleaved attn.to_qkv, ff.w1 as
  /// [gate; up]; decoder.mask_token is unused) or diffusers' (decoder.proj_in, attn.to_q/to_k/to_v,
  /// ff.net.0.proj as [up; gate]); F32, F16 or BF16, computed in F32. encoder.* and quant_conv are ignored.
  /// Widths and layers come from the shapes. A missing tensor, a wrong shape or dtype or a decoder tensor it
  /// does not use is a gizml::Error naming the file and the tensor.
  static H3VideoDecoder load(const std::string& path, const H3VideoConfig& config = {});

  /// The frames of the sampler's latents [1, latentChannels(), t, h, w] (t >= 3, the least diffusers' chunked
  /// decode takes; the model's clips have 5 n + 2): latents * latentsStd + latentsMean, the decode, then the
  /// ImageNet convention undone (x 0.229/0.224/0.225 + 0.485/0.456/0.406) and clamped to [0, 1]:
  /// [1, 3, frames, patch h, patch w] F32, 17 n + 5 frames for 5 n + 2 latents.
  tensor::Tensor decode(const tensor::Tensor& latents) const;

  int64_t latentChannels() const;
  const H3VideoConfig& config() const;

  struct Weights;

 private:
  std::shared_ptr<const Weights> weights_;
};

/// What MiniMax H3's audio decoder file does not tell by its shapes. The defaults are the released model's;
/// its latent statistics are in audio_vae/config.json (diffusers: the VAE's config), or in the file as
/// latents_mean and latents_std (stable-diffusion.cpp's packing), which win.
struct H3AudioConfig {
  int64_t sampleRate = 32000;
  std::vector<int64_t> dilations = {1, 3, 5};  // of each AMP block's convolution pairs
  std::vector<float> latentsMean, latentsStd;  // [latent channels] each
};

/// MiniMax H3's audio decoder (the spec's AudioDecoder), on the CPU in F32: dec_in_proj, then BigVGAN
/// (weight-normed convolutions, transposed-convolution upsamplers, anti-aliased SnakeBeta AMP blocks averaged a
/// stage, clamp to [-1, 1]). Mono: stereo is two streams.
class H3AudioDecoder {
 public:
  /// The audio VAE's file as stored (original and diffusers names are the same): dec_in_proj.* and decoder.*,
  /// convolutions as weight_g / weight_v or folded weights, the resamplers' Kaiser filters as stored; the
  /// encoder's tensors are ignored. Stage rates come from the upsamplers' kernels (2 u or 2 u - 1). Errors as
  /// H3VideoDecoder::load's; no latent statistics in the file or config is an Error too.
  static H3AudioDecoder load(const std::string& path, const H3AudioConfig& config = {});

  /// The sound of the sampler's latents [streams, latentChannels(), n] (stereo: 2): latents * std + mean,
  /// then the decoder: [streams, n hop()] F32 samples in [-1, 1] at sampleRate().
  tensor::Tensor decode(const tensor::Tensor& latents) const;

  int64_t latentChannels() const;
  /// Samples a latent frame makes: the product of the stage rates (800 for the released model).
  int64_t hop() const;
  int64_t sampleRate() const;

  struct Weights;

 private:
  std::shared_ptr<const Weights> weights_;
};

// ---- FLUX.2 [klein] and FLUX.3 klein: the DiT, its schedule and the Euler step ----

/// mu of ComfyUI's Flux2Scheduler (comfy_extras/nodes_flux.py compute_empirical_mu, which is
/// diffusers' and BFL's): an empirical line in the image's token count (width x height / 256),
/// between its 10- and 200-step fits by steps, or the 200-step fit alone above 4300 tokens.
double flux2Mu(int64_t imageTokens, int64_t steps);

/// ComfyUI's Flux2Scheduler sigmas: linspace(1, 0, steps + 1) in float32, each t mapped to
/// e^mu / (e^mu + (1 / t - 1)) in float32 as torch computes it (the last 0). steps must be
/// 1..4096 and imageTokens positive (ComfyUI's round(width x height / 256)).
std::vector<float> flux2Sigmas(int64_t steps, int64_t imageTokens);

/// ComfyUI's `euler` sampler step (k_diffusion sample_euler, no churn): d = (x - denoised) /
/// sigma, then x + d (sigmaNext - sigma), each operation rounded to float32. The sampler FLUX.2
/// [klein]'s ComfyUI workflows use with Flux2Scheduler. x and denoised F32 of one shape; sigma > 0.
tensor::Tensor eulerStep(const tensor::Tensor& x, const tensor::Tensor& denoised, float sigma, float sigmaNext);

/// What a klein DiT file does not tell by its tensors.
struct KleinConfig {
  /// The block linears (attention q/k/v and out, the MLPs' in and out, the single blocks' fused
  /// in and out): F32, the reference, or ConvRot's W8A8 as in ZImageConfig::linears. The
  /// embedders, modulations and final layer stay F32.
  ZImageConfig::Linears linears = ZImageConfig::Linears::F32;
  /// RoPE's (t, h, w, l) axes; empty: four equal axes of head dim / 4 (both models' [32, 32, 32,
  /// 32]). Their sum must be the head dim.
  std::vector<int64_t> ropeAxes;
  /// RoPE's theta; 0: the variant's (FLUX.2 2000, FLUX.3 10000, diffusers' defaults).
  double ropeTheta = 0;
};

/// The step cache of one sampling run, which KleinDit::forward reads and updates (docs/klein.md),
/// as ParaAttention's First Block Cache with TeaCache's accumulation: each step runs the first
/// blocks (FLUX.2: the first double-stream block; FLUX.3: the per-mode blocks) and adds to the
/// accumulated change mean |r - r'| / mean |r'| of what they added to the image's rows (r) against
/// the previous step's (r'). While the sum stays below the threshold, the step skips the other
/// blocks and adds what they added to the image's rows at the last step that ran them; otherwise
/// it runs them, keeps that, and the sum starts again from 0. The first and the last step run
/// every block. One cache per run: it holds the run's tensors, and copies of it go on apart.
///
/// refresh (the spec's option for edits): the reference pictures' tokens run through the blocks
/// only at the first step and then once at least refresh steps have passed since they last ran
/// through every block; the steps between leave them out and attend to the keys and values that
/// run kept in each block (faster: the references' rows skip every linear; a little different:
/// those keys were made from an earlier step's latent). 0 or 1: every step runs them.
class KleinStepCache {
 public:
  /// threshold: 0 runs every block of every step (forward's result bit for bit as without the
  /// cache); infinity skips every step but the first and last. steps: the run's forward calls.
  /// A negative or NaN threshold, steps below 1 or a negative refresh is a gizml::Error naming it.
  KleinStepCache(double threshold, int64_t steps, int64_t refresh = 0);

  double threshold() const { return threshold_; }
  int64_t steps() const { return steps_; }
  int64_t refresh() const { return refresh_; }
  /// The forward calls so far, and of them the steps that skipped the blocks after the first.
  int64_t done() const { return done_; }
  int64_t skipped() const { return skipped_; }
  /// Whether the last forward call skipped them.
  bool lastSkipped() const { return lastSkipped_; }
  /// The steps that ran reference pictures through every block (with refresh above 1).
  int64_t referenceRuns() const { return referenceRuns_; }

 private:
  friend class KleinDit;
  double threshold_;
  int64_t steps_, refresh_, done_ = 0, skipped_ = 0;
  bool lastSkipped_ = false;
  double change_ = 0;       // accumulated since the last step that ran every block
  tensor::Tensor first_;    // what the first blocks added to the image's rows at the previous step
  tensor::Tensor rest_;     // what the other blocks added at the last step that ran them
  // The references' keys (after RoPE) and values by block, [heads, tokens, head dim], from the
  // step referencesRanAt_ (none kept yet: empty).
  std::vector<tensor::Tensor> referenceKeys_, referenceValues_;
  int64_t referencesRanAt_ = -1, referenceRuns_ = 0;
};

/// The klein transformer, FLUX.2 [klein] (diffusers Flux2Transformer2DModel without guidance
/// embedder; BFL's flux2 model) or FLUX.3 (diffusers Flux3Transformer2DModel), as the file's
/// tensor names say, in F32 on the CPU, one latent at a time. Where the two differ (docs/klein.md):
/// FLUX.2 runs double-stream blocks (image and text streams, joint attention) then fused single
/// blocks over [text, image, references], modulated once per step from the time; FLUX.3 runs
/// per-mode blocks (text, image, references each attending to itself) then joint parallel blocks
/// over [text, image, references], the text and references modulated at time 0 and a flow-map
/// file's target-time embedding added to all. Both: no biases, LayerNorm (eps 1e-6, no affine)
/// with (1 + scale) x + shift, q/k RMSNorm, SwiGLU, 4-axis RoPE on interleaved pairs.
class KleinDit {
 public:
  enum class Variant { Flux2, Flux3 };

  /// diffusers' names (`transformer_blocks.N.attn.to_q.weight`, ...) or BFL's single-file names
  /// as ComfyUI loads them (`double_blocks.N.img_attn.qkv.weight`, ...), optionally under
  /// `model.diffusion_model.`; F32, F16 or BF16, computed in F32; or ComfyUI's INT8 files
  /// (comfy_kitchen's "int8_tensorwise": I8 codes, `weight_scale` per output channel or tensor,
  /// `comfy_quant` with or without ConvRot's rotation over 16, 64 or 256 inputs): the blocks'
  /// codes taken as stored by INT8 linears (config.linears; no quantizing again), dequantized
  /// once for F32 ones. The widths, heads (from the q norm's size), layer counts and channels
  /// come from the shapes. A missing tensor, a wrong shape
  /// or dtype, or a tensor it does not use under the model's prefix is a gizml::Error naming the
  /// file and the tensor.
  static KleinDit load(const std::string& path, const KleinConfig& config = {});
  /// The variant a safetensors file holds, told as load tells it, from its header alone (the
  /// file is mapped, not read); nullopt: not a klein DiT (another model). A file that cannot be
  /// read or is not safetensors is a gizml::Error naming it.
  static std::optional<Variant> variantOf(const std::string& path);

  /// The network's output for latent [1, channels(), h, w] (the VAE latent patchified 2 x 2:
  /// token (y, x) is the column latent[0, :, y, x]) at noise level sigma in [0, 1], with reference
  /// latents (each [1, referenceChannels(), hi, wi], any count) and text [tokens, textDim()]: the
  /// flow velocity ComfyUI's diffusion model returns, so denoised = latent - sigma out;
  /// [1, channels(), h, w] F32. Positions (t, h, w, l): FLUX.2 text (0, 0, 0, l), image (0, y, x,
  /// 0), reference i (10 + 10 i, y, x, 0); FLUX.3 text alike, image (0, y / 2, x / 2, 0),
  /// reference i (0, y / 2, x / 2, -1 - i). targetSigma: the sigma this step goes to, read by
  /// flow-map FLUX.3 files only (flowMap()).
  tensor::Tensor forward(const tensor::Tensor& latent, const std::vector<tensor::Tensor>& references,
                         const tensor::Tensor& text, double sigma, double targetSigma = 0) const;
  /// forward as one step of a run with the step cache, which it reads and updates: the step may
  /// skip the blocks after the first (cache.lastSkipped()). A call beyond cache.steps(), or a
  /// latent of other tokens than the run's, is a gizml::Error.
  tensor::Tensor forward(const tensor::Tensor& latent, const std::vector<tensor::Tensor>& references,
                         const tensor::Tensor& text, double sigma, double targetSigma, KleinStepCache& cache) const;

  Variant variant() const;
  /// Whether the file embeds the step's target sigma (FLUX.3's step-distilled files).
  bool flowMap() const;
  int64_t channels() const;
  int64_t referenceChannels() const;
  int64_t textDim() const;
  int64_t dim() const;

  struct Weights;

 private:
  friend class KleinPass;  // klein_pass.h: forward in the parts the step cache tells apart
  std::shared_ptr<const Weights> weights_;
};

// ---- MiniMax H3 (text to video with sound): the transformer on the CPU in F32 ----

/// MiniMax H3's sigma shifts: its video and audio rows step down schedules of their own.
struct H3Shift {
  double video = 12.0;
  double audio = 3.0;
};

/// A keyframe the video is held to: its latent [videoChannels(), 1, h, w] (the target's h and w),
/// already noised to t 0.999 as the pipeline does (scale_noise), anchored at the first latent
/// frame or the last.
struct H3Keyframe {
  tensor::Tensor latent;
  bool last = false;
};

/// What a request conditions H3 on: the text encoder's states [tokens, textDim()], each token's
/// modality tag (1 text, 0 a vision block's rows; empty: all 1) and the keyframes.
struct H3Condition {
  tensor::Tensor text;
  std::vector<int> textTags;
  std::vector<H3Keyframe> keyframes;
};

/// A request's video and sound, as latents or as their velocities: video [videoChannels(),
/// frames, h, w] (h, w even), audio [2, latents, audioChannels()] (stereo, channel-major as H3
/// packs it). F32.
struct H3Latents {
  tensor::Tensor video, audio;
};

/// A LoRA merged into MiniMax H3 as it loads: the file (safetensors on the checkpoint's module
/// names, optionally under `diffusion_model.`: kohya's `<module>.lora_down.weight`,
/// `.lora_up.weight` and `.alpha`, or peft's `.lora_A.weight`, `.lora_B.weight`) and its strength.
struct H3Lora {
  std::string path;
  double scale = 1.0;
};

/// MiniMax H3's transformer (diffusers MiniMaxH3Transformer3DModel; stable-diffusion.cpp
/// minimax_h3.hpp) on the CPU in F32. One packed sequence [text | keyframes | target audio |
/// target video] passes the blocks: the text projected and refined (unmodulated blocks, no
/// RoPE), the video's 1 x 2 x 2 patches and the audio's rows projected; each block is full
/// self-attention (q/k RMSNorm, 3-axis RoPE on the leading 6 x rope_freq_dim channels of a head,
/// rotate-half) and a SwiGLU, each modulated per row by the AdaLN row of its (timestep, modality);
/// an RMSNorm modulated per timestep and the two heads give the target rows' velocities. The
/// velocity is data-ward: x0 = x + sigma v.
class H3Model {
 public:
  /// The checkpoint's own tensor names (`blocks.N.attn.qkv_proj.weight` stacked [q; k; v],
  /// `blocks.N.mlp.fc1.weight` [gate; value], `video_patch_proj`, `condition_proj`,
  /// `time_embedder.proj_in`, `token_refiner.blocks.N`, `final_layer.*`, `rope.inv_freq`; F32,
  /// F16 or BF16, computed in F32), also under ComfyUI's `model.diffusion_model.`; INT8 weights
  /// as ComfyUI's int8_tensorwise files store them (I8 codes, `weight_scale`, `comfy_quant` with
  /// or without ConvRot) and its 4-bit W4A8 files (asym_w4a8_int8: codes decoded to the INT8 grid
  /// comfy_kitchen multiplies): the blocks' attention and MLP linears keep their codes and run as
  /// W8A8 (Int8Linear: the activations rotated and quantized per row, an exact integer product),
  /// any other such weight is dequantized; a pruned checkpoint's `adaln_t_table` [grid, time width]
  /// (AdaLN inputs sampled over t in [0, 1], read linearly between grid points) instead of the
  /// time embedder. Sizes come from the shapes. A missing tensor, a wrong shape or dtype or a
  /// tensor it does not use is a gizml::Error naming the file and the tensor. Each of loras is
  /// merged into its linears (W += scale (alpha / rank) up down, alpha / rank 1 when no alpha is
  /// stored; an INT8 linear is dequantized, merged and runs in F32); a LoRA tensor of another layout, of a module the model has not or of a wrong shape
  /// is an Error naming the LoRA file and the tensor.
  static H3Model load(const std::string& path, const std::vector<H3Lora>& loras = {});

  /// One denoising pass: the velocities of x's target rows with the target video at t videoT and
  /// the audio at audioT (t = 1 - sigma, in [0, 1]), the keyframes at max(videoT, 0.999), the
  /// text at videoT. Its AdaLN rows are computed for this pass. Bad shapes are an Error.
  H3Latents forward(const H3Latents& x, double videoT, double audioT, const H3Condition& condition) const;

  /// Makes and keeps the AdaLN tables of a schedule of `steps` Euler passes (sigmas
  /// linspace(1, 0, steps + 1) under each shift, in float32, as MiniMaxH3Scheduler with
  /// steps + 1 points): every block's rows and the output norm's for each pass's video, audio and
  /// keyframe t, so that sample computes none. Returns their size in bytes (F32: for the released
  /// model's 50 blocks of 5376, 349 MB for 6 passes). steps >= 1, shifts > 0, else an Error.
  int64_t prepare(int64_t steps, H3Shift shift = {});

  /// The prepared schedule's passes from noise (the initial latents): each a forward on the
  /// prepared tables and MiniMaxH3Scheduler's Euler step (eta 0) for the video and the audio.
  /// Without a prepare, an Error. onStep, when set, is told each pass done (0-based).
  H3Latents sample(const H3Latents& noise, const H3Condition& condition,
                   const std::function<void(int64_t step, const H3Latents& x)>& onStep = {}) const;

  /// The same model with its weights (and any prepared tables) on gpu, as tensor ops: forward and
  /// sample take latents and text on the host or there, and give them there. The rotary tables and
  /// the row indices are made on the host and copied.
  H3Model to(const gizhw::gpu::Gpu& gpu) const;

  /// The prepared schedule's sigmas (steps + 1 each, the last 0); empty before prepare.
  const std::vector<float>& videoSigmas() const;
  const std::vector<float>& audioSigmas() const;
  /// The prepared tables' bytes; 0 before prepare.
  int64_t tableBytes() const;

  int64_t hidden() const;
  int64_t blocks() const;
  int64_t videoChannels() const;
  int64_t audioChannels() const;
  int64_t textDim() const;

  struct Weights;
  struct Tables;

 private:
  std::shared_ptr<const Weights> weights_;
  std::shared_ptr<const Tables> tables_;
};


// ---- MiniMax H3's text conditioning and pipeline (text to video with sound) ----

/// The hidden state MiniMax H3 conditions on: hidden_states[50] of its Qwen3-VL conditioner's
/// language model (diffusers' MiniMaxH3ModularPipeline.text_encoder_layer), before any final norm.
inline constexpr int64_t kH3TextLayer = 50;

/// MiniMax H3's text conditioning on the CPU in F32, as diffusers' MiniMaxH3TextEncoderStep makes
/// it for text to video (t2va): the prompt verbatim (no chat template, no special tokens), every
/// token attended at positions 0, 1, ... (Qwen3-VL's 3-axis positions are one position for text),
/// the states after `layer` layers, each row tagged text. Each call reads in an engine of its own;
/// copies share the weights.
class H3Text {
 public:
  /// folder: convertTextEncoder(source, folder, {layer})'s output from Qwen3-VL (or any converted
  /// folder holding the first `layer` layers; only those are loaded). A missing folder or one with
  /// fewer layers, or layer below 1, is a gizml::Error naming it.
  static H3Text load(const std::string& folder, int64_t layer = kH3TextLayer);

  std::vector<llm::TokenId> promptTokens(const std::string& prompt) const;
  /// H3Model's condition: text [tokens, width()] and no tags (all text). An empty prompt or one
  /// longer than the encoder's context is an Error.
  H3Condition condition(const std::string& prompt) const;
  int64_t width() const;

  struct Parts;

 private:
  std::shared_ptr<const Parts> parts_;
};

/// What H3Pipeline takes besides its files. The defaults are the released model's as diffusers'
/// MiniMaxH3ModularPipeline runs it.
struct H3PipelineConfig {
  int64_t steps = 6;  // Euler passes, 1 to 1000 (the spec's request; prepared once at load)
  H3Shift shift;
  int64_t textLayer = kH3TextLayer;
  H3VideoConfig video;
  H3AudioConfig audio;
  double fps = 24;
  int64_t audioLatentsPerSecond = 40;
  double minSeconds = 5, maxSeconds = 15;  // of the aligned frame count at fps
  /// The default canvas: 16:9 with this short edge, its area capped at maxPixels, each side rounded
  /// to sizeMultiple() (diffusers' resolve_canvas_size): 1344 x 768 for the released model.
  int64_t canvasShortEdge = 768, canvasMaxPixels = 768 * 1344;
  /// Where the transformer runs (H3Model::to, its prepared tables with it): the noise, the passes
  /// and sample's latents there. The text encoder and the decoders stay on the host (decode reads
  /// the latents back). None: the host.
  std::optional<gizhw::gpu::Gpu> gpu;
};

/// What H3Pipeline::generate makes: the frames [1, 3, frames, height, width] F32 in [0, 1] at
/// fps, and the stereo sound [2, samples] F32 in [-1, 1] at sampleRate.
struct H3Video {
  tensor::Tensor frames, sound;
  double fps = 24;
  int64_t sampleRate = 0;
};

/// The seconds generate spent in each stage.
struct H3Times {
  double text = 0, sample = 0, video = 0, audio = 0;
};

/// The size of an H3 request once the pipeline has resolved it: frames rounded up to the video
/// decoder's 17 n + 5, the latent shapes they make.
struct H3Layout {
  int64_t frames = 0, width = 0, height = 0;
  int64_t latentFrames = 0, latentHeight = 0, latentWidth = 0, audioLatents = 0;
};

/// MiniMax H3 from prompt to video with sound on the CPU in F32, as diffusers' modular pipeline
/// runs text to video (t2va): condition (H3Text), noise (TorchGenerator(seed): the video latent
/// [1, channels, latent frames, h, w], then the audio rows [2 x audio latents, channels]), sample
/// (H3Model::sample on the schedule load prepared) and decode (H3VideoDecoder, H3AudioDecoder).
/// The calls keep no state; copies share the weights. The transformer runs on config().gpu when
/// set; the text encoder and the decoders on the host.
class H3Pipeline {
 public:
  /// model: H3Model::load's checkpoint; videoDecoder and audioDecoder: the VAEs' files;
  /// textFolder: H3Text::load's. Prepares config.steps passes (H3Model::prepare). A missing or bad
  /// file is a gizml::Error naming it; so are a text encoder whose width is not the model's text
  /// width and decoders whose latent channels are not the model's (both files named).
  static H3Pipeline load(const std::string& model, const std::string& videoDecoder, const std::string& audioDecoder,
                         const std::string& textFolder, const H3PipelineConfig& config = {});

  /// frames rounded up to 17 n + 5 and the latents' sizes for width x height (positive multiples
  /// of sizeMultiple(), each side at most image::kMaxSide; 0 x 0: defaultSize()). A size not so, a
  /// video outside the config's seconds at fps (for the released model 108 to 345 frames: 346 to
  /// 360 round up past 15 s) or a config that makes no layout is an Error naming the numbers.
  H3Layout layout(int64_t frames, int64_t width = 0, int64_t height = 0) const;
  /// The same from a config alone, before any file loads.
  static H3Layout layout(const H3PipelineConfig& config, int64_t frames, int64_t width = 0, int64_t height = 0);
  std::pair<int64_t, int64_t> defaultSize() const;  // width, height
  static std::pair<int64_t, int64_t> defaultSize(const H3PipelineConfig& config);
  /// The video decoder's pixels a latent times the model's patch (32 for the released model).
  int64_t sizeMultiple() const;
  static int64_t sizeMultiple(const H3PipelineConfig& config);

  H3Condition condition(const std::string& prompt) const;
  /// The seed's initial latents for layout (H3Latents' shapes).
  H3Latents noise(uint64_t seed, const H3Layout& layout) const;
  /// The prepared passes from noise; onStep, when set, after each (0-based).
  H3Latents sample(const H3Latents& noise, const H3Condition& condition,
                   const std::function<void(int64_t step, const H3Latents& x)>& onStep = {}) const;
  /// The frames and the sound of sampled latents. times, when given, gets the video and audio seconds.
  H3Video decode(const H3Latents& latents, H3Times* times = nullptr) const;
  /// condition, noise, sample and decode; times, when given, gets each stage's seconds.
  H3Video generate(const std::string& prompt, uint64_t seed, const H3Layout& layout,
                   const std::function<void(int64_t step, const H3Latents& x)>& onStep = {},
                   H3Times* times = nullptr) const;

  const H3PipelineConfig& config() const;
  const H3Model& model() const;

  struct Parts;

 private:
  std::shared_ptr<const Parts> parts_;
};

// ---- FLUX.2 [klein]'s text conditioning ----

/// The hidden states FLUX.2 [klein] reads from Qwen3-4B: transformers' hidden_states 9, 18 and 27
/// (diffusers' text_encoder_out_layers, ComfyUI's layer=[9, 18, 27]), side by side: 3 x 2560 =
/// 7680, the DiT's joint_attention_dim.
inline const std::vector<int64_t> kKleinTextLayers = {9, 18, 27};

/// A text encoder from Qwen3 or Qwen3-VL (its language model, model.language_model.*; the vision
/// tower is left out), a Hugging Face folder or a GGUF file: converted with gizml::llm into
/// destination keeping the embedding and the first max(layers) layers (klein's from Qwen3-4B or
/// Qwen3-VL-4B: 27 of 36 for kKleinTextLayers; MiniMax H3's from its Qwen3-VL: {kH3TextLayer}), at
/// 16 bits as convertZImageText (which says why), without the final norm and the output layer. An empty list, a state not after a layer (below 1), a model of another
/// architecture or with fewer layers than the last state needs is a gizml::Error naming it.
llm::ConvertReport convertTextEncoder(const std::string& source, const std::string& destination,
                                      const std::vector<int64_t>& layers = kKleinTextLayers);

/// What KleinText reads. The defaults are FLUX.2 [klein] 4B's.
struct KleinTextConfig {
  std::vector<int64_t> layers = kKleinTextLayers;  // hidden_states indices, side by side in this order
  int64_t minTokens = 512;  // the rows padded up to (ComfyUI's min_length, diffusers' max_sequence_length)
};

/// FLUX.2 [klein]'s text conditioning on the CPU in F32, as ComfyUI runs it (comfy/text_encoders/
/// flux.py KleinTokenizer and Qwen3_4BModel): the prompt in the template
/// "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
/// (diffusers' apply_chat_template with enable_thinking=False writes the same), tokenized whole,
/// then padded on the right with <|endoftext|> (151643) to minTokens; the encoder's attention
/// mask ends at the first <|endoftext|> (the padding; ComfyUI's too when the prompt itself
/// holds one), so every row, the padding's too, attends only the tokens before it, at positions
/// 0, 1, ...; each row's states after the layers, side by side. diffusers (pipeline_flux2_klein.py)
/// agrees up to minTokens; past that it truncates the template to 512 tokens, ComfyUI keeps all
/// of them, and so does this. The calls keep no state (each reads in an engine of its own);
/// copies share the weights.
class KleinText {
 public:
  /// folder: convertTextEncoder's output (or any converted folder holding the layers, Qwen3-8B's
  /// for klein 9B; only those up to the last state are loaded). A missing folder, a tokenizer
  /// without <|endoftext|>, layers outside 1 .. the folder's, or minTokens below 1 is a
  /// gizml::Error naming it.
  static KleinText load(const std::string& folder, const KleinTextConfig& config = {});

  /// The template's token ids for prompt, unpadded.
  std::vector<llm::TokenId> promptTokens(const std::string& prompt) const;
  /// The DiT's text rows: [max(minTokens, template tokens), width()] F32 on the host, row t the
  /// states of token t after each configured layer in turn. The DiT numbers them itself (FLUX.2's
  /// text ids (0, 0, 0, t), which diffusers' _prepare_text_ids makes from the row count alone). A
  /// template longer than the encoder's context is an Error.
  tensor::Tensor condition(const std::string& prompt) const;

  /// layers.size() x the encoder's width: 7680 for klein 4B.
  int64_t width() const;
  const KleinTextConfig& config() const;

  struct Parts;

 private:
  std::shared_ptr<const Parts> parts_;
};

// ---- FLUX.2 [klein]'s pipeline: text to image and edits ----

/// What KleinPipeline takes besides its files. The defaults are FLUX.2 [klein] 4B's distilled
/// model as ComfyUI's klein workflow and diffusers' Flux2KleinPipeline run it.
struct KleinPipelineConfig {
  KleinConfig dit;
  KleinTextConfig text;
  /// Euler steps over flux2Sigmas; 0: the distilled files' count by variant, FLUX.2 [klein] 4B's
  /// 4 (its model card; diffusers' pipeline defaults to the base model's 50), FLUX.3 klein's 16
  /// (the spec). config() tells the count load chose.
  int64_t steps = 0;
  /// The area the default size of an edit keeps (editSize), in pixels: 1024 x 1024.
  int64_t editArea = int64_t{1} << 20;
  /// The step cache's threshold (KleinStepCache; the spec's 0.3); 0 turns it off. A negative or
  /// NaN value is an Error at load.
  double cache = 0.3;
  /// An edit's reference pictures through the blocks only every this many steps
  /// (KleinStepCache's refresh); 0, the default, or 1: every step. Negative: an Error at load.
  int64_t refresh = 0;
};

/// A box of FLUX 3's layout prompts (BFL's "FLUX 3 Image: bounding boxes"): coordinates
/// [top, left, bottom, right], integers from 0 to 1000 from the image's top-left corner.
using FluxBox = std::array<int64_t, 4>;

/// One row of a layout's element table. A new image's row places an element: bbox. An edit's
/// row (edit true; pictures given) says where it comes from and goes: from "ref_image_K" (the
/// K-th picture, its box source in that picture) or empty (a new element, no source), target in
/// the output (none: the element is removed).
struct FluxElement {
  std::string id;  // cited in the caption as <id>: lowercase letters, digits and _, from a letter
  std::string desc;
  FluxBox bbox{};
  bool edit = false;
  std::string from;
  std::optional<FluxBox> source, target;
};

/// The spec's D.fluxLayout: caption with the element table FLUX 3 reads appended, as BFL's
/// documentation writes it: each id not yet cited in the caption appended as " <id>", then a
/// space and the rows as a compact JSON array ({"id", "bbox", "desc"}, or for edits {"id",
/// "from", "src_bbox", "tgt_bbox", "desc"} with null where absent). No elements: the caption
/// unchanged. An empty caption, a bad or repeated id, a box outside [0, 1000] or empty, an empty
/// desc, rows of both kinds, or an edit row without source and target is a gizml::Error naming it.
std::string fluxLayout(const std::string& caption, const std::vector<FluxElement>& elements);

/// The most elements fluxElements reads.
inline constexpr size_t kMaxFluxElements = 1000;

/// The elements of a layout table written as fluxLayout writes it (a JSON list of {"id", "bbox",
/// "desc"} image rows, or {"id", "from", "src_bbox", "tgt_bbox", "desc"} edit rows, null where
/// absent): what giz paint --layout and the image endpoints' "layout" read. A value that is not
/// such a list, a row of unknown or missing keys, or a box that is not 4 whole numbers is a
/// gizml::Error naming the row; the rest (ranges, ids, kinds mixed) is fluxLayout's to check.
std::vector<FluxElement> fluxElements(const nlohmann::ordered_json& table);
/// fluxElements of JSON text (a file, a form field), its nesting bounded as it is read: text that
/// is not JSON is a gizml::Error too.
std::vector<FluxElement> readFluxElements(std::string_view json);

/// How the prompt upsampler generates: diffusers' Flux2Pipeline.upsample_prompt's defaults.
struct UpsamplerConfig {
  double temperature = 0.15;  // 0: greedy
  int64_t limit = 512;        // new tokens at most
  uint64_t seed = 0;          // the draws' (llm::Sampling::seed)
};

/// The spec's D.Upsampler: BFL's prompt upsampler (FLUX.2's, black-forest-labs/flux2 and
/// diffusers' Flux2Pipeline.upsample_prompt): a chat model asked, under BFL's system prompt, to
/// rewrite a short prompt as a fuller one, or, for an edit, as one editing instruction. The
/// spec's model for klein is Qwen3.5-9B; any model llm::convert made with a chat template works.
/// A model with a vision tower (convert keeps Qwen3.5's and Qwen3-VL's) is shown an edit's
/// pictures, as diffusers shows them; a model without one writes the instruction from the
/// request alone.
class Upsampler {
 public:
  /// A converted chat model's folder (llm::convert's), loaded whole, with its vision tower
  /// (FOLDER/vision) when it has one. A folder that does not load is a gizml::Error naming it; a
  /// model without a chat template, or a text encoder's first layers only, one at caption.
  static Upsampler load(const std::string& folder, const UpsamplerConfig& config = {});
  /// tower: the model's vision tower (none: pictures are not shown); its rows must be the
  /// model's width (an Error naming both).
  explicit Upsampler(llm::Model model, const UpsamplerConfig& config = {},
                     std::shared_ptr<const vision::Tower> tower = nullptr);

  /// The fuller prompt (the model's answer, thinking off, whitespace trimmed from both ends).
  /// pictures: an edit's pictures (none: text to image). An empty prompt is a gizml::Error.
  std::string caption(const std::string& prompt, const std::vector<image::Image>& pictures = {}) const;
  /// The same, sampled with this seed rather than the config's (a server's request's).
  std::string caption(const std::string& prompt, const std::vector<image::Image>& pictures, uint64_t seed) const;

  /// The chat caption sends: BFL's system prompt for text to image, or for edits when `edit`,
  /// then, when `showsPicture`, a user turn showing the picture ({"type": "image"}), then the
  /// prompt as the user's message (diffusers' format_input).
  static nlohmann::ordered_json messages(const std::string& prompt, bool edit, bool showsPicture = false);
  /// The one picture a model is shown for an edit's pictures (diffusers'
  /// _validate_and_process_images): several side by side, left to right, each centred
  /// vertically on white (Flux2ImageProcessor.concatenate_images), then within 768 x 768 pixels
  /// (image::fitArea). No pictures, or an empty one, is a gizml::Error.
  static image::Image shownPicture(const std::vector<image::Image>& pictures);

 private:
  llm::Model model_;
  UpsamplerConfig config_;
  std::shared_ptr<const vision::Tower> tower_;
};

/// What the DiT reads besides the latent: the text rows and the reference pictures' latents.
struct KleinConditioning {
  tensor::Tensor text;                     // [rows, textDim] F32 (KleinText::condition)
  std::vector<tensor::Tensor> references;  // each [1, channels, h, w] F32 (Flux2Vae::encode)
};

/// FLUX.2 [klein] (and FLUX.3 klein's DiT in its layout) from prompt and pictures to picture on
/// the CPU in F32, as diffusers' Flux2KleinPipeline runs it with ComfyUI's noise (cfg 1, one
/// prompt): condition (KleinText's rows, each reference picture resized as the pipeline does and
/// Flux2Vae::encode), sample (torchRandn(seed, [1, channels, height / scale, width / scale]),
/// ComfyUI's EmptyFlux2LatentImage's shape, stepped by eulerStep over flux2Sigmas with
/// denoised = x - sigma KleinDit::forward, through a KleinStepCache of config().cache and refresh) and decode
/// (Flux2Vae::decode and ComfyUI's SaveImage bytes). The calls keep no state; copies share the
/// weights. The GPU is not used yet.
class KleinPipeline {
 public:
  /// ditPath: KleinDit::load's file; vaePath: flux2-vae.safetensors (Flux2Vae::load); textFolder:
  /// convertTextEncoder's output (KleinText::load). A missing or bad file is a gizml::Error naming
  /// it; so are a text encoder whose rows are not the DiT's text width and a VAE whose latent
  /// channels are not the DiT's (both files named).
  static KleinPipeline load(const std::string& ditPath, const std::string& vaePath, const std::string& textFolder,
                            const KleinPipelineConfig& config = {});

  /// The picture as the DiT reads it as a reference (diffusers' Flux2KleinPipeline): above
  /// 1024 x 1024 pixels, scaled to that area (sides int(side sqrt(area / pixels)), Pillow's
  /// LANCZOS); then center-cropped to multiples of sizeMultiple() (an Error when a side is below one).
  image::Image referencePicture(const image::Image& picture) const;
  /// prompt's text rows and the pictures' latents (referencePicture, then Flux2Vae::encode).
  KleinConditioning condition(const std::string& prompt, const std::vector<image::Image>& pictures = {}) const;
  /// The latent of an image of width x height (positive multiples of sizeMultiple(); else an
  /// Error) from the seed's noise after config().steps Euler steps, with a step cache of
  /// config().cache of its own; onStep, when set, is called after every step (ZImageStep::cached:
  /// whether the cache skipped it). [1, channels, height / sizeMultiple(), width / sizeMultiple()]
  /// F32.
  tensor::Tensor sample(const KleinConditioning& conditioning, uint64_t seed, int64_t width, int64_t height,
                        const std::function<void(const ZImageStep&)>& onStep = {}) const;
  /// The picture of a latent: Flux2Vae::decode, then image::fromTensor with Range::MinusOneOne.
  image::Image decode(const tensor::Tensor& latent) const;
  /// condition, sample and decode. width and height 0: editSize of the first picture (an Error
  /// without pictures). times, when given, gets each stage's seconds.
  image::Image paint(const std::string& prompt, uint64_t seed, const std::vector<image::Image>& pictures = {},
                     int64_t width = 0, int64_t height = 0, const std::function<void(const ZImageStep&)>& onStep = {},
                     ZImageTimes* times = nullptr) const;

  /// An edit's default size: the picture's aspect at about config().editArea pixels, each side
  /// int(side sqrt(area / pixels)) floored to a multiple of sizeMultiple() (at least one).
  std::pair<int64_t, int64_t> editSize(const image::Image& picture) const;
  /// Width and height must be multiples of this: the VAE's scale (16 for FLUX.2's).
  int64_t sizeMultiple() const;
  const KleinPipelineConfig& config() const;

  struct Parts;

 private:
  std::shared_ptr<const Parts> parts_;
};

}  // namespace gizml::diffusion
