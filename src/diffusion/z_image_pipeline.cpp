// ZImagePipeline: Z-Image Turbo as ComfyUI runs it (cfg 1): the text encoder's states, the
// seed's noise sampled by res_multistep with the DiT as denoiser, and FLUX.1's VAE.
#include <gizml/diffusion.h>
#include <gizml/error.h>

#include <chrono>
#include <optional>
#include <string>

#include "pipeline_stages.h"

namespace gizml::diffusion {

// Under lowMemory the DiT and the text encoder are not held: each call loads the one it runs.
struct ZImagePipeline::Parts {
  std::optional<ZImageDit> dit;
  FluxVae vae;
  std::optional<llm::Model> text;
  std::shared_ptr<const llm::Tokenizer> tokenizer;  // the text encoder's
  std::string ditPath, textFolder;
  int64_t channels = 0, captionDim = 0, textContext = 0;
  ZImagePipelineConfig config;
  std::vector<float> sigmas;
};

namespace {

// comfy/text_encoders/z_image.py ZImageTokenizer's template (diffusers' apply_chat_template with
// enable_thinking=True writes the same).
constexpr const char* kTemplateStart = "<|im_start|>user\n";
constexpr const char* kTemplateEnd = "<|im_end|>\n<|im_start|>assistant\n";

// The DiT of path where config places it.
ZImageDit loadDit(const std::string& path, const ZImagePipelineConfig& config) {
  ZImageDit dit = ZImageDit::load(path, config.dit);
  return config.gpu ? dit.to(*config.gpu) : dit;
}

}  // namespace

ZImagePipeline ZImagePipeline::load(const std::string& ditPath, const std::string& textFolder,
                                    const std::string& vaePath, const ZImagePipelineConfig& config) {
  auto parts = std::make_shared<Parts>();
  // Under lowMemory each part is checked by loading it and let go before the next is loaded.
  std::optional<ZImageDit> dit = loadDit(ditPath, config);
  parts->channels = dit->channels();
  parts->captionDim = dit->captionDim();
  if (config.lowMemory) dit.reset();
  FluxVae vae = FluxVae::load(vaePath);
  if (config.gpu) vae = vae.to(*config.gpu);
  std::optional<llm::Model> text = llm::load(textFolder);
  const int64_t width = text->hiddenSize();
  check(width == parts->captionDim, textFolder + ": the text encoder's states are " + std::to_string(width) +
                                        " wide, and " + ditPath + " reads captions " +
                                        std::to_string(parts->captionDim) + " wide");
  check(vae.latentChannels() == parts->channels, vaePath + ": the VAE's latents have " +
                                                     std::to_string(vae.latentChannels()) + " channels, and " +
                                                     ditPath + "'s " + std::to_string(parts->channels));
  parts->textContext = text->contextLength();
  if (config.lowMemory) {
    text.reset();
    parts->tokenizer = std::make_shared<const llm::Tokenizer>(llm::Tokenizer::fromJson(textFolder));
  }
  parts->dit = std::move(dit);
  parts->vae = std::move(vae);
  parts->text = std::move(text);
  parts->ditPath = ditPath;
  parts->textFolder = textFolder;
  parts->config = config;
  parts->sigmas = flowSigmas(config.steps, config.shift);
  ZImagePipeline out;
  out.parts_ = std::move(parts);
  return out;
}

std::vector<llm::TokenId> ZImagePipeline::promptTokens(const std::string& prompt) const {
  const Parts& p = *parts_;
  const llm::Tokenizer& tokenizer = p.text ? p.text->tokenizer() : *p.tokenizer;
  return tokenizer.encode(kTemplateStart + prompt + kTemplateEnd, false);
}

tensor::Tensor ZImagePipeline::condition(const std::string& prompt) const {
  const std::vector<llm::TokenId> ids = promptTokens(prompt);
  const Parts& p = *parts_;
  check(static_cast<int64_t>(ids.size()) <= p.textContext, "ZImagePipeline::condition: the prompt's " +
                                                               std::to_string(ids.size()) + " tokens exceed the text encoder's " +
                                                               std::to_string(p.textContext));
  const llm::Model text = p.text ? *p.text : llm::load(p.textFolder);
  // An engine of the prompt's length alone: its KV pool is never used (hidden reads the prompt in
  // a state of its own) and stays that small.
  return text.engine(1, static_cast<int64_t>(ids.size())).hidden(ids);
}

tensor::Tensor ZImagePipeline::sampleWith(const tensor::Tensor& caption, uint64_t seed, int64_t width, int64_t height,
                                          const std::function<void(const ZImageStep&)>& onStep) const {
  const Parts& p = *parts_;
  checkSize("ZImagePipeline::sampleWith", sizeMultiple(), width, height);
  check(caption.shape().size() == 2 && caption.shape()[0] > 0 && caption.shape()[1] == p.captionDim,
        "ZImagePipeline::sampleWith: the caption is " + tensor::shapeText(caption.shape()) + ", not [tokens, " +
            std::to_string(p.captionDim) + "]");
  const ZImageDit dit = p.dit ? *p.dit : loadDit(p.ditPath, p.config);
  const int64_t up = p.vae.upscale();
  tensor::Tensor x = torchRandn(seed, {1, p.channels, height / up, width / up});
  if (p.config.gpu) x = x.on(*p.config.gpu);
  ResMultistep sampler(p.sigmas);
  for (int64_t i = 0; i < sampler.steps(); ++i) {
    const auto start = std::chrono::steady_clock::now();
    const float sigma = p.sigmas[static_cast<size_t>(i)];
    // ComfyUI's CONST model sampling: denoised = x - out * sigma, in float32.
    const tensor::Tensor out = dit.forward(x, sigma, caption);
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
  const tensor::Tensor caption = timed(t.condition, [&] { return condition(prompt); });
  const tensor::Tensor latent = timed(t.sample, [&] { return sampleWith(caption, seed, width, height, onStep); });
  image::Image out = timed(t.decode, [&] { return decode(latent); });
  if (times) *times = t;
  return out;
}

int64_t ZImagePipeline::sizeMultiple() const { return parts_->vae.upscale() * parts_->config.dit.patch; }
int64_t ZImagePipeline::captionDim() const { return parts_->captionDim; }
const ZImagePipelineConfig& ZImagePipeline::config() const { return parts_->config; }

}  // namespace gizml::diffusion
