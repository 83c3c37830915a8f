// FLUX.2's VAE (diffusers src/diffusers/models/autoencoders/autoencoder_kl_flux2.py, the latents
// as pipelines/flux2/pipeline_flux2_klein.py makes and reads them): vae_blocks.h's encoder and
// decoder with quant_conv, post_quant_conv and the BatchNorm statistics of the patchified
// latents. One image at a time in F32.
#include <gizml/diffusion.h>

#include <filesystem>
#include <string>

#include "vae_blocks.h"

namespace gizml::diffusion {

namespace {

// The safetensors file of path: itself, or a diffusers folder's (the VAE's own or a pipeline's).
std::string weightsFile(const std::string& path) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(path)) return path;
  for (const char* name : {"diffusion_pytorch_model.safetensors", "vae/diffusion_pytorch_model.safetensors"})
    if (fs::is_regular_file(fs::path(path) / name)) return (fs::path(path) / name).string();
  throw Error(path + ": no diffusion_pytorch_model.safetensors in it or in its vae/ folder (not a FLUX.2 VAE?)");
}

// [z, h, w] to [4 z, h / 2, w / 2], channel 4 c + 2 dy + dx (the pipeline's _patchify_latents).
T::Tensor patchify(const T::Tensor& x) {
  const int64_t z = x.size(0), h = x.size(1) / 2, w = x.size(2) / 2;
  return x.reshape({z, h, 2, w, 2}).permute({0, 2, 4, 1, 3}).contiguous().reshape({4 * z, h, w});
}

// The inverse: [4 z, h, w] to [z, 2 h, 2 w].
T::Tensor unpatchify(const T::Tensor& x) {
  const int64_t z = x.size(0) / 4, h = x.size(1), w = x.size(2);
  return x.reshape({z, 2, 2, h, w}).permute({0, 3, 1, 4, 2}).contiguous().reshape({z, 2 * h, 2 * w});
}

}  // namespace

struct Flux2Vae::Weights {
  std::optional<gizhw::gpu::Gpu> gpu;  // where the tensors are; none: the host
  vae::Encoder encoder;
  vae::Decoder decoder;
  vae::Conv quantMean;  // quant_conv's rows of the posterior's mean (its log variance is unused)
  vae::Conv postQuant;
  T::Tensor mean, std;  // [4 z, 1, 1]: running_mean, sqrt(running_var + eps)
};

Flux2Vae Flux2Vae::load(const std::string& path) {
  const std::string file = weightsFile(path);
  vae::Reader r(file, "", "a FLUX.2 VAE");
  auto w = std::make_shared<Weights>();
  w->decoder = r.decoder("decoder.");
  const int64_t z = w->decoder.convIn.w.size(1) / 9;
  w->postQuant = r.conv("decoder.post_quant_conv", z, z, 1);
  w->encoder = r.encoder("encoder.");
  if (w->encoder.convOut.w.size(0) != 2 * z)
    r.fail("encoder.conv_out.weight", "makes " + std::to_string(w->encoder.convOut.w.size(0)) +
                                          " channels, expected twice the decoder's " + std::to_string(z));
  if (w->encoder.levels.size() != w->decoder.levels.size())
    throw Error(file + ": the encoder has " + std::to_string(w->encoder.levels.size()) + " levels, the decoder " +
                std::to_string(w->decoder.levels.size()) + " (not a FLUX.2 VAE?)");
  const vae::Conv quant = r.conv("encoder.quant_conv", 2 * z, 2 * z, 1);
  w->quantMean = {quant.w.slice(0, 0, z).contiguous(), quant.b.slice(0, 0, z).contiguous(), 1};
  w->mean = r.take("bn.running_mean", {4 * z}).reshape({4 * z, 1, 1});
  w->std = (T::lazy(r.take("bn.running_var", {4 * z})) + kBatchNormEps).sqrt().eval().reshape({4 * z, 1, 1});
  r.ignore("bn.num_batches_tracked");
  r.requireAllTaken();
  Flux2Vae vae;
  vae.weights_ = std::move(w);
  return vae;
}

Flux2Vae Flux2Vae::to(const gizhw::gpu::Gpu& gpu) const {
  const Weights& w = *weights_;
  auto m = std::make_shared<Weights>();
  m->gpu = gpu;
  m->encoder = vae::moved(w.encoder, gpu);
  m->decoder = vae::moved(w.decoder, gpu);
  m->quantMean = vae::moved(w.quantMean, gpu);
  m->postQuant = vae::moved(w.postQuant, gpu);
  m->mean = w.mean.on(gpu);
  m->std = w.std.on(gpu);
  Flux2Vae vae;
  vae.weights_ = std::move(m);
  return vae;
}

int64_t Flux2Vae::latentChannels() const { return weights_->mean.size(0); }
int64_t Flux2Vae::imageChannels() const { return weights_->decoder.convOut.w.size(0); }
int64_t Flux2Vae::scale() const { return int64_t{2} << (weights_->decoder.levels.size() - 1); }

T::Tensor Flux2Vae::encode(const T::Tensor& pixels) const {
  const Weights& w = *weights_;
  const int64_t s = scale();
  if (pixels.ndim() != 4 || pixels.size(0) < 1 || pixels.size(1) != imageChannels() || pixels.size(2) < s ||
      pixels.size(3) < s || pixels.size(2) % s != 0 || pixels.size(3) % s != 0)
    throw Error("Flux2Vae::encode: pixels of shape " + T::shapeText(pixels.shape()) + " are not [n, " +
                std::to_string(imageChannels()) + ", h, w] with h and w multiples of " + std::to_string(s));
  if (!isFloat(pixels.dtype()))
    throw Error(std::string("Flux2Vae::encode: pixels are ") + dtypeName(pixels.dtype()) + ", not a float dtype");
  T::Tensor x = pixels.host().cast(DType::F32);
  if (w.gpu) x = x.on(*w.gpu);
  std::vector<T::Tensor> latents;
  for (int64_t i = 0; i < x.size(0); ++i) {
    const T::Tensor mean = vae::conv(w.quantMean, vae::encode(w.encoder, x.slice(0, i, i + 1).squeeze(0)));
    latents.push_back(((T::lazy(patchify(mean)) - T::lazy(w.mean)) / T::lazy(w.std)).eval());
  }
  return T::stack(latents, 0);
}

T::Tensor Flux2Vae::decode(const T::Tensor& latents) const {
  const Weights& w = *weights_;
  if (latents.ndim() != 4 || latents.size(0) < 1 || latents.size(1) != latentChannels() || latents.size(2) < 1 ||
      latents.size(3) < 1)
    throw Error("Flux2Vae::decode: latents of shape " + T::shapeText(latents.shape()) + " are not [n, " +
                std::to_string(latentChannels()) + ", h, w]");
  if (!isFloat(latents.dtype()))
    throw Error(std::string("Flux2Vae::decode: latents are ") + dtypeName(latents.dtype()) + ", not a float dtype");
  T::Tensor z = latents.host().cast(DType::F32);
  if (w.gpu) z = z.on(*w.gpu);
  std::vector<T::Tensor> images;
  for (int64_t i = 0; i < z.size(0); ++i) {
    const T::Tensor zi = (T::lazy(z.slice(0, i, i + 1).squeeze(0)) * T::lazy(w.std) + T::lazy(w.mean)).eval();
    images.push_back(vae::decode(w.decoder, vae::conv(w.postQuant, unpatchify(zi))));
  }
  return T::stack(images, 0);
}

}  // namespace gizml::diffusion
