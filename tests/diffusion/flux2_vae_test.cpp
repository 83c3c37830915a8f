// gizml::diffusion::Flux2Vae against tests/reference/make_flux2_vae_fixtures.py: a tiny diffusers
// AutoencoderKLFlux2 (block_out_channels [32, 32], 32 latent channels, BF16 weights) in BFL's and
// in diffusers' names, its encode of seeded pixels into the klein pipeline's normalized
// patchified latents and its decode of seeded latents, run by torch in float32. Both within
// kTolerance absolute; bad files and inputs: a gizml::Error naming the file and the tensor.
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gizml/safetensors.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "diffusion/weight_fixture.h"

using namespace gizml;

namespace {

// torch's conv, GroupNorm and attention sum in other orders. The latents are about N(0, 0.4),
// the pixels within about [-1.8, 1.3]. Measured (x86-64, release build): encode 1.4e-6, decode
// 1.6e-6; at FLUX.2's full sizes (the fixture script's --full, random weights): 1.5e-6 and 5.6e-6
// (pixels within about [-1.3, 1.7]), so a real file may need more than kTolerance.
constexpr double kTolerance = 5e-6;

const std::map<std::string, T::Tensor>& fixtureCase() {
  static const std::map<std::string, T::Tensor> c =
      llm::loadSafetensors(test::diffusionData("flux2_vae_tiny_case.safetensors"));
  return c;
}

void expectMatchesTorch(const diffusion::Flux2Vae& vae, const char* names) {
  EXPECT_EQ(vae.latentChannels(), 128);
  EXPECT_EQ(vae.imageChannels(), 3);
  EXPECT_EQ(vae.scale(), 4);
  const T::Tensor& encodedWant = fixtureCase().at("encoded");
  const T::Tensor encoded = vae.encode(fixtureCase().at("pixels"));
  ASSERT_EQ(encoded.shape(), encodedWant.shape());
  const double encodeErr = test::maxAbsDiff(encoded, encodedWant);
  const T::Tensor& decodedWant = fixtureCase().at("decoded");
  const T::Tensor decoded = vae.decode(fixtureCase().at("latents"));
  ASSERT_EQ(decoded.shape(), decodedWant.shape());
  const double decodeErr = test::maxAbsDiff(decoded, decodedWant);
  std::printf("Flux2Vae tiny (%s names): max |gizml - torch| encode %.3g, decode %.3g\n", names, encodeErr,
              decodeErr);
  EXPECT_LE(encodeErr, kTolerance);
  EXPECT_LE(decodeErr, kTolerance);
}

void expectLoadError(const std::string& path, const std::string& tensorName) {
  test::expectLoadError([](const std::string& p) { diffusion::Flux2Vae::load(p); }, path, tensorName);
}

std::string edited(const std::string& file, const std::string& tag, const std::function<void(test::Weights&)>& edit) {
  return test::editedWeights(file, "flux2_vae_" + tag, edit);
}

}  // namespace

TEST(Flux2Vae, BflNamesMatchTorch) {
  expectMatchesTorch(diffusion::Flux2Vae::load(test::diffusionData("flux2_vae_tiny.safetensors")), "BFL");
}

TEST(Flux2Vae, DiffusersNamesMatchTorch) {
  expectMatchesTorch(diffusion::Flux2Vae::load(test::diffusionData("flux2_vae_tiny_diffusers.safetensors")),
                     "diffusers");
}

TEST(Flux2Vae, DiffusersFolder) {
  // diffusers' layout: the pipeline's folder with vae/diffusion_pytorch_model.safetensors.
  const std::filesystem::path dir = test::temporary("flux2_vae_folder");
  std::filesystem::create_directories(dir / "vae");
  std::filesystem::copy_file(test::diffusionData("flux2_vae_tiny_diffusers.safetensors"),
                             dir / "vae" / "diffusion_pytorch_model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  const diffusion::Flux2Vae vae = diffusion::Flux2Vae::load(dir.string());
  const diffusion::Flux2Vae sub = diffusion::Flux2Vae::load((dir / "vae").string());
  EXPECT_EQ(test::maxAbsDiff(vae.decode(fixtureCase().at("latents")), sub.decode(fixtureCase().at("latents"))), 0.0);
  std::filesystem::remove_all(dir);
  EXPECT_THROW(diffusion::Flux2Vae::load(dir.string()), Error);
}

TEST(Flux2Vae, BadFilesNameTheTensor) {
  const std::string bfl = "flux2_vae_tiny.safetensors", diffusers = "flux2_vae_tiny_diffusers.safetensors";
  expectLoadError(edited(bfl, "no_mean", [](auto& w) { w.erase("bn.running_mean"); }), "bn.running_mean");
  expectLoadError(edited(bfl, "no_quant", [](auto& w) { w.erase("encoder.quant_conv.bias"); }),
                  "encoder.quant_conv.bias");
  expectLoadError(edited(bfl, "downsample", [](auto& w) { w.erase("encoder.down.0.downsample.conv.weight"); }),
                  "encoder.down.0.downsample.conv.weight");
  expectLoadError(
      edited(bfl, "var_shape", [](auto& w) { w.at("bn.running_var") = T::zeros({64}); }), "bn.running_var");
  expectLoadError(edited(bfl, "post_quant",
                         [](auto& w) { w.at("decoder.post_quant_conv.weight") = T::zeros({32, 32, 3, 3}); }),
                  "decoder.post_quant_conv.weight");
  expectLoadError(edited(bfl, "extra", [](auto& w) { w["encoder.down.1.downsample.conv.weight"] = T::zeros({1}); }),
                  "encoder.down.1.downsample.conv.weight");
  // In diffusers' names, the errors name the file's tensors.
  expectLoadError(edited(diffusers, "d_missing",
                         [](auto& w) { w.erase("encoder.mid_block.attentions.0.to_out.0.weight"); }),
                  "encoder.mid_block.attentions.0.to_out.0.weight");
  expectLoadError(edited(diffusers, "d_shape",
                         [](auto& w) { w.at("decoder.up_blocks.0.upsamplers.0.conv.bias") = T::zeros({16}); }),
                  "decoder.up_blocks.0.upsamplers.0.conv.bias");
  expectLoadError(edited(diffusers, "d_dtype", [](auto& w) { w.at("quant_conv.bias") = T::zeros({64}, DType::I32); }),
                  "quant_conv.bias");
}

TEST(Flux2Vae, BadInputs) {
  const diffusion::Flux2Vae vae = diffusion::Flux2Vae::load(test::diffusionData("flux2_vae_tiny.safetensors"));
  EXPECT_THROW(vae.encode(T::zeros({1, 3, 16, 22})), Error);  // width not a multiple of 4
  EXPECT_THROW(vae.encode(T::zeros({1, 4, 16, 24})), Error);
  EXPECT_THROW(vae.encode(T::zeros({3, 16, 24})), Error);
  EXPECT_THROW(vae.encode(T::zeros({1, 3, 16, 24}, DType::I32)), Error);
  EXPECT_THROW(vae.decode(T::zeros({1, 32, 3, 5})), Error);
  EXPECT_THROW(vae.decode(T::zeros({128, 3, 5})), Error);
  EXPECT_THROW(vae.decode(T::zeros({1, 128, 3, 5}, DType::I32)), Error);
}
