// KleinPipeline: FLUX.2 [klein] as diffusers' Flux2KleinPipeline runs it (cfg 1) with ComfyUI's
// noise: the text rows and the references' latents, Euler over Flux2Scheduler's sigmas with the
// DiT as denoiser, and FLUX.2's VAE.
#include <gizml/diffusion.h>
#include <gizml/error.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "pipeline_stages.h"

namespace gizml::diffusion {

struct KleinPipeline::Parts {
  KleinDit dit;
  Flux2Vae vae;
  KleinText text;
  KleinPipelineConfig config;
};

namespace {

// The largest reference diffusers' Flux2KleinPipeline keeps before scaling it down.
constexpr int64_t kReferenceArea = int64_t{1024} * 1024;

// Sides scaled to about area pixels as Flux2ImageProcessor._resize_to_target_area: int(side s).
std::pair<int64_t, int64_t> scaledToArea(const image::Image& picture, int64_t area) {
  const double s = std::sqrt(static_cast<double>(area) / static_cast<double>(picture.width * picture.height));
  return {static_cast<int64_t>(static_cast<double>(picture.width) * s),
          static_cast<int64_t>(static_cast<double>(picture.height) * s)};
}

// Flux2ImageProcessor._resize_and_crop: PIL's crop of the centered width x height box.
image::Image centerCrop(const image::Image& picture, int64_t width, int64_t height) {
  const int64_t left = (picture.width - width) / 2, top = (picture.height - height) / 2;
  image::Image out{width, height, std::vector<uint8_t>(static_cast<size_t>(width * height * 3))};
  for (int64_t y = 0; y < height; ++y) {
    const auto from = picture.pixels.begin() + ((top + y) * picture.width + left) * 3;
    std::copy(from, from + width * 3, out.pixels.begin() + y * width * 3);
  }
  return out;
}

}  // namespace

KleinPipeline KleinPipeline::load(const std::string& ditPath, const std::string& vaePath,
                                  const std::string& textFolder, const KleinPipelineConfig& config) {
  check(config.steps >= 0, "KleinPipeline::load: steps " + std::to_string(config.steps) + " is negative");
  check(config.editArea >= 1, "KleinPipeline::load: editArea " + std::to_string(config.editArea) + " is below 1");
  check(config.cache >= 0, "KleinPipeline::load: cache " + std::to_string(config.cache) + " is negative or NaN");
  check(config.refresh >= 0, "KleinPipeline::load: refresh " + std::to_string(config.refresh) + " is negative");
  KleinDit dit = KleinDit::load(ditPath, config.dit);
  Flux2Vae vae = Flux2Vae::load(vaePath);
  KleinText text = KleinText::load(textFolder, config.text);
  check(text.width() == dit.textDim(), textFolder + ": the text encoder's rows are " + std::to_string(text.width()) +
                                           " wide, and " + ditPath + " reads text " +
                                           std::to_string(dit.textDim()) + " wide");
  check(vae.latentChannels() == dit.channels() && vae.latentChannels() == dit.referenceChannels(),
        vaePath + ": the VAE's latents have " + std::to_string(vae.latentChannels()) + " channels, and " + ditPath +
            "'s " + std::to_string(dit.channels()) + " (references " + std::to_string(dit.referenceChannels()) + ")");
  KleinPipelineConfig chosen = config;
  if (chosen.steps == 0) chosen.steps = dit.variant() == KleinDit::Variant::Flux2 ? 4 : 16;
  KleinPipeline out;
  out.parts_ = std::make_shared<const Parts>(Parts{std::move(dit), std::move(vae), std::move(text), chosen});
  return out;
}

image::Image KleinPipeline::referencePicture(const image::Image& picture) const {
  check(picture.width > 0 && picture.height > 0 &&
            static_cast<int64_t>(picture.pixels.size()) == picture.width * picture.height * 3,
        "KleinPipeline: a reference picture of " + std::to_string(picture.width) + " x " +
            std::to_string(picture.height) + " pixels holds " + std::to_string(picture.pixels.size()) + " bytes");
  image::Image scaled = picture;
  if (picture.width * picture.height > kReferenceArea) {
    const auto [w, h] = scaledToArea(picture, kReferenceArea);
    scaled = image::resize(picture, std::max<int64_t>(w, 1), std::max<int64_t>(h, 1));
  }
  const int64_t m = sizeMultiple();
  const int64_t width = scaled.width / m * m, height = scaled.height / m * m;
  check(width > 0 && height > 0, "KleinPipeline: a reference picture of " + std::to_string(scaled.width) + " x " +
                                     std::to_string(scaled.height) + " pixels is smaller than " +
                                     std::to_string(m) + " x " + std::to_string(m));
  return centerCrop(scaled, width, height);
}

KleinConditioning KleinPipeline::condition(const std::string& prompt, const std::vector<image::Image>& pictures) const {
  KleinConditioning out;
  out.text = parts_->text.condition(prompt);
  for (const image::Image& picture : pictures) {
    const tensor::Tensor pixels = image::toTensor(referencePicture(picture), image::Range::MinusOneOne).unsqueeze(0);
    out.references.push_back(parts_->vae.encode(pixels));
  }
  return out;
}

tensor::Tensor KleinPipeline::sample(const KleinConditioning& conditioning, uint64_t seed, int64_t width,
                                     int64_t height, const std::function<void(const ZImageStep&)>& onStep) const {
  const Parts& p = *parts_;
  const int64_t m = sizeMultiple();
  checkSize("KleinPipeline::sample", m, width, height);
  const tensor::Tensor& text = conditioning.text;
  check(text.shape().size() == 2 && text.shape()[0] > 0 && text.shape()[1] == p.dit.textDim(),
        "KleinPipeline::sample: the text is " + tensor::shapeText(text.shape()) + ", not [rows, " +
            std::to_string(p.dit.textDim()) + "]");
  const int64_t h = height / m, w = width / m;
  // EmptyFlux2LatentImage's latent [1, 128, H / 16, W / 16] and ComfyUI's noise for it.
  tensor::Tensor x = torchRandn(seed, {1, p.dit.channels(), h, w});
  // The schedule's token count: diffusers' image_seq_len, ComfyUI's round(W H / 256) at scale 16.
  const std::vector<float> sigmas = flux2Sigmas(p.config.steps, h * w);
  const auto steps = static_cast<int64_t>(sigmas.size()) - 1;
  KleinStepCache cache(p.config.cache, steps, p.config.refresh);
  for (int64_t i = 0; i < steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const float sigma = sigmas[static_cast<size_t>(i)], next = sigmas[static_cast<size_t>(i) + 1];
    const tensor::Tensor velocity = p.dit.forward(x, conditioning.references, text, sigma, next, cache);
    // ComfyUI's CONST model sampling: denoised = x - out sigma, in float32.
    const tensor::Tensor denoised = x.sub(velocity.mul(tensor::scalar(sigma, DType::F32)));
    x = eulerStep(x, denoised, sigma, next);
    if (onStep) onStep({.step = i, .steps = steps, .sigma = sigma, .seconds = secondsSince(start), .latent = x,
                   .cached = cache.lastSkipped()});
  }
  return x;
}

image::Image KleinPipeline::decode(const tensor::Tensor& latent) const {
  check(latent.shape().size() == 4 && latent.shape()[0] == 1,
        "KleinPipeline::decode: one latent [1, channels, h, w] at a time, not " + tensor::shapeText(latent.shape()));
  return image::fromTensor(parts_->vae.decode(latent).squeeze(0).host(), image::Range::MinusOneOne);
}

image::Image KleinPipeline::paint(const std::string& prompt, uint64_t seed, const std::vector<image::Image>& pictures,
                                  int64_t width, int64_t height, const std::function<void(const ZImageStep&)>& onStep,
                                  ZImageTimes* times) const {
  if (width == 0 && height == 0) {
    check(!pictures.empty(), "KleinPipeline::paint: no size and no picture to take it from");
    std::tie(width, height) = editSize(pictures.front());
  }
  checkSize("KleinPipeline::paint", sizeMultiple(), width, height);
  ZImageTimes t;
  const KleinConditioning conditioning = timed(t.condition, [&] { return condition(prompt, pictures); });
  const tensor::Tensor latent = timed(t.sample, [&] { return sample(conditioning, seed, width, height, onStep); });
  image::Image out = timed(t.decode, [&] { return decode(latent); });
  if (times) *times = t;
  return out;
}

std::pair<int64_t, int64_t> KleinPipeline::editSize(const image::Image& picture) const {
  check(picture.width > 0 && picture.height > 0, "KleinPipeline::editSize: an empty picture");
  const auto [w, h] = scaledToArea(picture, parts_->config.editArea);
  const int64_t m = sizeMultiple();
  return {std::max(w / m, int64_t{1}) * m, std::max(h / m, int64_t{1}) * m};
}

int64_t KleinPipeline::sizeMultiple() const { return parts_->vae.scale(); }
const KleinPipelineConfig& KleinPipeline::config() const { return parts_->config; }

}  // namespace gizml::diffusion
