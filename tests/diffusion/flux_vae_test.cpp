// gizml::diffusion::FluxVae against tests/reference/make_vae_fixtures.py: a tiny FLUX.1 VAE decoder
// (ch 32, ch_mult [1, 2], 2 blocks a level, z 16, BF16 weights in BFL's names) run in plain torch
// float32 on a seeded latent. The pixels within kTolerance absolute; the bytes of ComfyUI's
// SaveImage at most one apart and almost all equal (a pixel near a rounding edge of 255 x may fall
// either side; measured: all 720 equal). Bad files: a gizml::Error naming the file and the tensor.
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gizml/image.h>
#include <gizml/safetensors.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "diffusion/weight_fixture.h"

using namespace gizml;

namespace {

// The image's values are within about [-1.2, 1.3]; torch's conv and GroupNorm sum in other orders.
// Measured: 1.4e-6 (x86-64, release build).
constexpr double kTolerance = 5e-6;

std::string dataPath(const std::string& name) { return test::diffusionData(name); }

const std::map<std::string, T::Tensor>& fixtureCase() {
  static const std::map<std::string, T::Tensor> c = llm::loadSafetensors(dataPath("vae_tiny_case.safetensors"));
  return c;
}

using test::maxAbsDiff;

std::string editedWeights(const std::string& name, const std::function<void(test::Weights&)>& edit) {
  return test::editedWeights("vae_tiny.safetensors", "vae_" + name, edit);
}

void expectLoadError(const std::string& path, const std::string& tensorName) {
  test::expectLoadError([](const std::string& p) { diffusion::FluxVae::load(p); }, path, tensorName);
}

}  // namespace

TEST(FluxVae, DecodesAsTorch) {
  const diffusion::FluxVae vae = diffusion::FluxVae::load(dataPath("vae_tiny.safetensors"));
  EXPECT_EQ(vae.latentChannels(), 16);
  EXPECT_EQ(vae.outChannels(), 3);
  EXPECT_EQ(vae.upscale(), 2);
  const T::Tensor& expected = fixtureCase().at("image");
  const T::Tensor image = vae.decode(fixtureCase().at("latent"));
  ASSERT_EQ(image.shape(), expected.shape());
  const double err = maxAbsDiff(image, expected);
  std::printf("FluxVae tiny decoder: max |gizml - torch| = %.3g\n", err);
  EXPECT_LE(err, kTolerance);

  // ComfyUI's bytes: clamp((x + 1) / 2), 255 x truncated.
  const image::Image picture = image::fromTensor(image.squeeze(0), image::Range::MinusOneOne);
  const std::vector<int64_t> bytes = fixtureCase().at("bytes").toInts();
  ASSERT_EQ(picture.pixels.size(), bytes.size());
  int64_t differ = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    EXPECT_LE(std::abs(int64_t{picture.pixels[i]} - bytes[i]), 1) << "byte " << i;
    differ += int64_t{picture.pixels[i]} != bytes[i];
  }
  std::printf("FluxVae tiny decoder: %lld of %zu bytes differ from torch's\n", static_cast<long long>(differ),
              bytes.size());
  EXPECT_LE(differ, 2);
}

TEST(FluxVae, AttentionAsLinears) {
  // Some files store the attention's 1 x 1 convolutions as [c, c] linears: the same decoder.
  const std::string path = editedWeights("linears", [](auto& w) {
    for (const char* p : {"q", "k", "v", "proj_out"}) {
      T::Tensor& t = w.at(std::string("decoder.mid.attn_1.") + p + ".weight");
      t = t.reshape({t.size(0), t.size(1)}).contiguous();
    }
  });
  const T::Tensor linears = diffusion::FluxVae::load(path).decode(fixtureCase().at("latent"));
  std::filesystem::remove(path);
  const T::Tensor convs =
      diffusion::FluxVae::load(dataPath("vae_tiny.safetensors")).decode(fixtureCase().at("latent"));
  EXPECT_EQ(maxAbsDiff(linears, convs), 0.0);
}

TEST(FluxVae, DiffusersNames) {
  // The decoder renamed as diffusers' convert_ldm_vae_checkpoint renames it (the pairs in
  // vae_tiny_diffusers_names.txt, the attention's weights [c, c]): the same decoder.
  const std::string path = editedWeights("diffusers", [](auto& w) {
    std::ifstream names(dataPath("vae_tiny_diffusers_names.txt"));
    test::Weights renamed;
    for (std::string bfl, diffusers; names >> bfl >> diffusers;) {
      T::Tensor t = w.at(bfl);
      if (diffusers.find(".attentions.") != std::string::npos && t.ndim() == 4) t = t.reshape({t.size(0), t.size(1)});
      renamed[diffusers] = t.contiguous();
    }
    EXPECT_EQ(renamed.size(), w.size());
    w = renamed;
  });
  const T::Tensor diffusers = diffusion::FluxVae::load(path).decode(fixtureCase().at("latent"));
  std::filesystem::remove(path);
  const T::Tensor bfl = diffusion::FluxVae::load(dataPath("vae_tiny.safetensors")).decode(fixtureCase().at("latent"));
  EXPECT_EQ(maxAbsDiff(diffusers, bfl), 0.0);
}

TEST(FluxVae, BadFilesNameTheTensor) {
  expectLoadError(editedWeights("missing", [](auto& w) { w.erase("decoder.up.0.block.1.conv2.bias"); }),
                  "decoder.up.0.block.1.conv2.bias");
  expectLoadError(editedWeights("shape",
                                [](auto& w) {
                                  w.at("decoder.mid.block_2.conv1.weight") = T::zeros({64, 32, 3, 3}, DType::BF16);
                                }),
                  "decoder.mid.block_2.conv1.weight");
  expectLoadError(editedWeights("shortcut", [](auto& w) { w.erase("decoder.up.0.block.0.nin_shortcut.weight"); }),
                  "decoder.up.0.block.0.nin_shortcut.weight");
  expectLoadError(
      editedWeights("dtype", [](auto& w) { w.at("decoder.norm_out.bias") = T::zeros({32}, DType::I32); }),
      "decoder.norm_out.bias");
  expectLoadError(
      editedWeights("extra", [](auto& w) { w["decoder.up.0.attn.0.q.weight"] = T::zeros({32, 32}); }),
      "decoder.up.0.attn.0.q.weight");
  // A block making 48 channels, which 32 groups do not divide.
  expectLoadError(editedWeights("groups",
                                [](auto& w) {
                                  w.at("decoder.up.0.block.1.conv1.weight") = T::zeros({48, 32, 3, 3});
                                }),
                  "decoder.up.0.block.1.norm2.weight");
}

TEST(FluxVae, BadLatents) {
  const diffusion::FluxVae vae = diffusion::FluxVae::load(dataPath("vae_tiny.safetensors"));
  EXPECT_THROW(vae.decode(T::zeros({1, 4, 6, 10})), Error);
  EXPECT_THROW(vae.decode(T::zeros({16, 6, 10})), Error);
  EXPECT_THROW(vae.decode(T::zeros({1, 16, 6, 10}, DType::I32)), Error);
}
