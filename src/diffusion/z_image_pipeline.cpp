// ZImagePipeline: Z-Image Turbo as ComfyUI runs it (cfg 1): the text encoder's states, the
// seed's noise sampled by res_multistep with the DiT as denoiser, and FLUX.1's VAE.
#include <gizml/diffusion.h>
#include <gizml/error.h>

#include <chrono>
#include <string>

namespace gizml::diffusion {

struct ZImagePipeline::Parts {
  ZImageDit dit;
  FluxVae vae;
  llm::Model text;
  ZImagePipelineConfig config;
  std::vector<float> sigmas;
};

namespace {

// comfy/text_encoders/z_image.py ZImageTokenizer's template (diffusers' apply_chat_template with
// enable_thinking=True writes the same).
constexpr const char* kTemplateStart = "<|im_start|>user\n";
constexpr const char* kTemplateEnd = "<|im_end|>\n<|im_start|>assistant\n";

// Z-Image's sizes: whole patches of whole latent pixels.
void checkSize(const char* what, int64_t multiple, int64_t width, int64_t height) {
  check(width > 0 && height > 0 && width % multiple == 0 && height % multiple == 0,
        std::string(what) + ": the size " + std::to_string(width) + " x " + std::to_string(height) +
            " must be positive multiples of " + std::to_string(multiple));
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

ZImagePipeline ZImagePipeline::load(const std::string& ditPath, const std::string& textFolder,
                                    const std::string& vaePath, const ZImagePipelineConfig& config) {
  ZImageDit dit = ZImageDit::load(ditPath, config.dit);
  FluxVae vae = FluxVae::load(vaePath);
  if (config.gpu) {
    dit = dit.to(*config.gpu);
    vae = vae.to(*config.gpu);
  }
  llm::Model text = llm::load(textFolder);
  const int64_t width = text.hiddenSize();
  check(width == dit.captionDim(), textFolder + ": the text encoder's states are " + std::to_string(width) +
                                       " wide, and " + ditPath + " reads captions " +
                                       std::to_string(dit.captionDim()) + " wide");
  check(vae.latentChannels() == dit.channels(), vaePath + ": the VAE's latents have " +
                                                    std::to_string(vae.latentChannels()) + " channels, and " +
                                                    ditPath + "'s " + std::to_string(dit.channels()));
  ZImagePipeline out;
  out.parts_ = std::make_shared<const Parts>(
      Parts{std::move(dit), std::move(vae), std::move(text), config, flowSigmas(config.steps, config.shift)});
  return out;
}

std::vector<llm::TokenId> ZImagePipeline::promptTokens(const std::string& prompt) const {
  return parts_->text.tokenizer().encode(kTemplateStart + prompt + kTemplateEnd, false);
}

tensor::Tensor ZImagePipeline::condition(const std::string& prompt) const {
  const std::vector<llm::TokenId> ids = promptTokens(prompt);
  const int64_t context = parts_->text.contextLength();
  check(static_cast<int64_t>(ids.size()) <= context, "ZImagePipeline::condition: the prompt's " +
                                                         std::to_string(ids.size()) + " tokens exceed the text encoder's " +
                                                         std::to_string(context));
  // An engine of the prompt's length alone: its KV pool is never used (hidden reads the prompt in
  // a state of its own) and stays that small.
  return parts_->text.engine(1, static_cast<int64_t>(ids.size())).hidden(ids);
}

tensor::Tensor ZImagePipeline::sampleWith(const tensor::Tensor& caption, uint64_t seed, int64_t width, int64_t height,
                                          const std::function<void(const ZImageStep&)>& onStep) const {
  const Parts& p = *parts_;
  checkSize("ZImagePipeline::sampleWith", sizeMultiple(), width, height);
  check(caption.shape().size() == 2 && caption.shape()[0] > 0 && caption.shape()[1] == p.dit.captionDim(),
        "ZImagePipeline::sampleWith: the caption is " + tensor::shapeText(caption.shape()) + ", not [tokens, " +
            std::to_string(p.dit.captionDim()) + "]");
  const int64_t up = p.vae.upscale();
  tensor::Tensor x = torchRandn(seed, {1, p.dit.channels(), height / up, width / up});
  if (p.config.gpu) x = x.on(*p.config.gpu);
  ResMultistep sampler(p.sigmas);
  for (int64_t i = 0; i < sampler.steps(); ++i) {
    const auto start = std::chrono::steady_clock::now();
    const float sigma = p.sigmas[static_cast<size_t>(i)];
    // ComfyUI's CONST model sampling: denoised = x - out * sigma, in float32.
    const tensor::Tensor out = p.dit.forward(x, sigma, caption);
    tensor::Tensor sigmaScalar = tensor::scalar(sigma, DType::F32);
    if (p.config.gpu) sigmaScalar = sigmaScalar.on(*p.config.gpu);
    const tensor::Tensor denoised = x.sub(out.mul(sigmaScalar));
    x = sampler.step(i, x, denoised);
    if (onStep) onStep({.step = i, .steps = sampler.steps(), .sigma = sigma, .seconds = secondsSince(start), .latent = x});
  }
  return x;
}

image::Image ZImagePipeline::decode(const tensor::Tensor& latent) const {
  check(latent.shape().size() == 4 && latent.shape()[0] == 1,
        "ZImagePipeline::decode: one latent [1, channels, h, w] at a time, not " + tensor::shapeText(latent.shape()));
  return image::fromTensor(parts_->vae.decode(latent).squeeze(0).host(), image::Range::MinusOneOne);
}

image::Image ZImagePipeline::paint(const std::string& prompt, uint64_t seed, int64_t width, int64_t height,
                                   const std::function<void(const ZImageStep&)>& onStep, ZImageTimes* times) const {
  checkSize("ZImagePipeline::paint", sizeMultiple(), width, height);
  ZImageTimes t;
  auto start = std::chrono::steady_clock::now();
  const tensor::Tensor caption = condition(prompt);
  t.condition = secondsSince(start);
  start = std::chrono::steady_clock::now();
  const tensor::Tensor latent = sampleWith(caption, seed, width, height, onStep);
  t.sample = secondsSince(start);
  start = std::chrono::steady_clock::now();
  image::Image out = decode(latent);
  t.decode = secondsSince(start);
  if (times) *times = t;
  return out;
}

int64_t ZImagePipeline::sizeMultiple() const { return parts_->vae.upscale() * parts_->config.dit.patch; }
int64_t ZImagePipeline::captionDim() const { return parts_->dit.captionDim(); }
const ZImagePipelineConfig& ZImagePipeline::config() const { return parts_->config; }

}  // namespace gizml::diffusion
