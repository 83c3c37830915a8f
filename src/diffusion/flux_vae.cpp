// FLUX.1's VAE decoder in BFL's layout (black-forest-labs flux, src/flux/modules/autoencoder.py):
// the `decoder.` tensors of ae.safetensors read as vae_blocks.h's decoder, run one image at a time
// in F32 after BFL's latent scale and shift.
#include <gizml/diffusion.h>

#include <string>

#include "vae_blocks.h"

namespace gizml::diffusion {

struct FluxVae::Weights {
  std::optional<gizhw::gpu::Gpu> gpu;  // where the tensors are; none: the host
  vae::Decoder decoder;
};

FluxVae FluxVae::load(const std::string& path) {
  vae::Reader r(path, "decoder.", "a FLUX.1 VAE decoder");
  auto w = std::make_shared<Weights>();
  w->decoder = r.decoder("");
  r.requireAllTaken();
  FluxVae vae;
  vae.weights_ = std::move(w);
  return vae;
}

FluxVae FluxVae::to(const gizhw::gpu::Gpu& gpu) const {
  auto m = std::make_shared<Weights>();
  m->gpu = gpu;
  m->decoder = vae::moved(weights_->decoder, gpu);
  FluxVae vae;
  vae.weights_ = std::move(m);
  return vae;
}

int64_t FluxVae::latentChannels() const { return weights_->decoder.convIn.w.size(1) / 9; }
int64_t FluxVae::outChannels() const { return weights_->decoder.convOut.w.size(0); }
int64_t FluxVae::upscale() const { return int64_t{1} << (weights_->decoder.levels.size() - 1); }

T::Tensor FluxVae::decode(const T::Tensor& latents) const {
  const Weights& w = *weights_;
  const int64_t latent = latentChannels();
  if (latents.ndim() != 4 || latents.size(0) < 1 || latents.size(1) != latent || latents.size(2) < 1 ||
      latents.size(3) < 1)
    throw Error("FluxVae::decode: latents of shape " + T::shapeText(latents.shape()) + " are not [n, " +
                std::to_string(latent) + ", h, w]");
  if (!isFloat(latents.dtype()))
    throw Error(std::string("FluxVae::decode: latents are ") + dtypeName(latents.dtype()) + ", not a float dtype");
  T::Tensor z = latents.host().cast(DType::F32), scale = T::scalar(kScale), shift = T::scalar(kShift);
  if (w.gpu) {
    z = z.on(*w.gpu);
    scale = scale.on(*w.gpu);
    shift = shift.on(*w.gpu);
  }
  std::vector<T::Tensor> images;
  for (int64_t i = 0; i < z.size(0); ++i) {
    const T::Tensor zi = (T::lazy(z.slice(0, i, i + 1).squeeze(0)) / T::lazy(scale) + T::lazy(shift)).eval();
    images.push_back(vae::decode(w.decoder, zi));
  }
  return T::stack(images, 0);
}

}  // namespace gizml::diffusion
