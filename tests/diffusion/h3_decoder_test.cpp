// gizml::diffusion::H3VideoDecoder and H3AudioDecoder against tests/reference/make_h3_decoder_fixtures.py:
// tiny MiniMax H3 decoders (video: a ViT of width 64, 2 heads of 32, 2 layers, patches 4 x 4 x 4; audio:
// BigVGAN of 32 channels, 2 stages of rates 5 and 2) run by diffusers 0.42.1 in float32, through the
// pipeline's latent and pixel conventions. The video is decoded in two chunks of latent frames and 2 x 3
// spatial tiles, as released. Frames and samples within kTolerance absolute; bad files: a gizml::Error
// naming the file and the tensor.
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gizml/safetensors.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "diffusion/weight_fixture.h"

using namespace gizml;

namespace {

// Frames lie in [0, 1] and samples in about [-0.2, 0.2]; torch's matmuls, attention and convolutions add in
// other orders. Measured (x86-64, release build): video 2.4e-7, audio 1.5e-7.
constexpr double kTolerance = 2e-6;

const std::map<std::string, T::Tensor>& videoCase() {
  static const auto c = llm::loadSafetensors(test::diffusionData("h3_video_tiny_case.safetensors"));
  return c;
}

const std::map<std::string, T::Tensor>& audioCase() {
  static const auto c = llm::loadSafetensors(test::diffusionData("h3_audio_tiny_case.safetensors"));
  return c;
}

// The fixture's geometry: make_h3_decoder_fixtures.py's VIDEO, TILE and TILE_OVERLAP.
diffusion::H3VideoConfig videoConfig() {
  diffusion::H3VideoConfig c;
  c.headDim = 32;
  c.patch = 4;
  c.patchT = 4;
  c.tile = 8;
  c.tileOverlap = 4;
  c.latentsMean = videoCase().at("latents_mean").toFloats();
  c.latentsStd = videoCase().at("latents_std").toFloats();
  return c;
}

diffusion::H3AudioConfig audioConfig() {
  diffusion::H3AudioConfig c;
  c.latentsMean = audioCase().at("latents_mean").toFloats();
  c.latentsStd = audioCase().at("latents_std").toFloats();
  return c;
}

void loadVideo(const std::string& path) { diffusion::H3VideoDecoder::load(path, videoConfig()); }
void loadAudio(const std::string& path) { diffusion::H3AudioDecoder::load(path, audioConfig()); }

}  // namespace

TEST(H3VideoDecoder, DecodesAsDiffusers) {
  const auto decoder = diffusion::H3VideoDecoder::load(test::diffusionData("h3_video_tiny.safetensors"), videoConfig());
  EXPECT_EQ(decoder.latentChannels(), 24);
  for (const std::string tag : {"a", "b"}) {
    const T::Tensor& expected = videoCase().at("frames_" + tag);
    const T::Tensor frames = decoder.decode(videoCase().at("latents_" + tag));
    ASSERT_EQ(frames.shape(), expected.shape()) << tag;
    const double err = test::maxAbsDiff(frames, expected);
    std::printf("H3VideoDecoder case %s %s: max |gizml - diffusers| = %.3g\n", tag.c_str(),
                T::shapeText(frames.shape()).c_str(), err);
    EXPECT_LE(err, kTolerance) << tag;
  }
}

TEST(H3VideoDecoder, ReadsDiffusersNames) {
  const auto original = diffusion::H3VideoDecoder::load(test::diffusionData("h3_video_tiny.safetensors"), videoConfig());
  const auto renamed =
      diffusion::H3VideoDecoder::load(test::diffusionData("h3_video_tiny_diffusers.safetensors"), videoConfig());
  const T::Tensor& latents = videoCase().at("latents_a");
  EXPECT_EQ(test::maxAbsDiff(original.decode(latents), renamed.decode(latents)), 0.0);
}

TEST(H3VideoDecoder, BadFilesNameTheTensor) {
  const auto edited = [](const std::string& tag, const std::function<void(test::Weights&)>& edit) {
    return test::editedWeights("h3_video_tiny.safetensors", "h3_video_" + tag, edit);
  };
  test::expectLoadError(loadVideo, edited("missing", [](test::Weights& w) {
    w.erase("decoder.transformer_blocks.1.attn.to_qkv.bias");
  }), "decoder.transformer_blocks.1.attn.to_qkv.bias");
  test::expectLoadError(loadVideo, edited("shape", [](test::Weights& w) {
    w["decoder.transformer_blocks.0.scale2"] = T::zeros({63});
  }), "decoder.transformer_blocks.0.scale2");
  test::expectLoadError(loadVideo, edited("extra", [](test::Weights& w) {
    w["decoder.unknown.weight"] = T::zeros({2});
  }), "decoder.unknown.weight");
  test::expectLoadError(loadVideo, edited("dtype", [](test::Weights& w) {
    w["decoder.proj_out.bias"] = T::zeros({192}, DType::I32);
  }), "decoder.proj_out.bias");
}

TEST(H3VideoDecoder, BadLatentsAreErrors) {
  const auto decoder = diffusion::H3VideoDecoder::load(test::diffusionData("h3_video_tiny.safetensors"), videoConfig());
  EXPECT_THROW(decoder.decode(T::zeros({1, 24, 2, 3, 4})), Error);  // fewer than 3 latent frames
  EXPECT_THROW(decoder.decode(T::zeros({1, 16, 7, 3, 4})), Error);
  EXPECT_THROW(decoder.decode(T::zeros({2, 24, 7, 3, 4})), Error);
  diffusion::H3VideoConfig c = videoConfig();
  c.latentsStd.pop_back();
  EXPECT_THROW(diffusion::H3VideoDecoder::load(test::diffusionData("h3_video_tiny.safetensors"), c), Error);
}

TEST(H3AudioDecoder, DecodesAsDiffusers) {
  const auto decoder = diffusion::H3AudioDecoder::load(test::diffusionData("h3_audio_tiny.safetensors"), audioConfig());
  EXPECT_EQ(decoder.latentChannels(), 32);
  EXPECT_EQ(decoder.hop(), 10);
  EXPECT_EQ(decoder.sampleRate(), 32000);
  const T::Tensor& expected = audioCase().at("samples");  // [2, 1, 60]
  const T::Tensor samples = decoder.decode(audioCase().at("latents"));
  ASSERT_EQ(samples.shape(), (T::Shape{2, 60}));
  const double err = test::maxAbsDiff(samples, expected.squeeze(1));
  std::printf("H3AudioDecoder: max |gizml - diffusers| = %.3g\n", err);
  EXPECT_LE(err, kTolerance);
}

// Files that fold weight_norm into plain weights (and carry the latent statistics) decode the same.
TEST(H3AudioDecoder, ReadsFoldedWeightsAndStoredStatistics) {
  const std::string path = test::editedWeights("h3_audio_tiny.safetensors", "h3_audio_folded", [](test::Weights& w) {
    std::vector<std::string> names;
    for (const auto& [name, t] : w)
      if (name.size() > 9 && name.substr(name.size() - 9) == ".weight_v") names.push_back(name.substr(0, name.size() - 9));
    for (const std::string& n : names) {
      const T::Tensor v = w.at(n + ".weight_v"), g = w.at(n + ".weight_g");
      w[n + ".weight"] = v.mul(g.div(v.mul(v).sum({1, 2}, true).sqrt()));
      w.erase(n + ".weight_v");
      w.erase(n + ".weight_g");
    }
    w["latents_mean"] = audioCase().at("latents_mean");
    w["latents_std"] = audioCase().at("latents_std");
  });
  const auto decoder = diffusion::H3AudioDecoder::load(path);
  const double err = test::maxAbsDiff(decoder.decode(audioCase().at("latents")), audioCase().at("samples").squeeze(1));
  std::filesystem::remove(path);
  EXPECT_LE(err, kTolerance);
}

TEST(H3AudioDecoder, BadFilesNameTheTensor) {
  const auto edited = [](const std::string& tag, const std::function<void(test::Weights&)>& edit) {
    return test::editedWeights("h3_audio_tiny.safetensors", "h3_audio_" + tag, edit);
  };
  test::expectLoadError(loadAudio, edited("missing", [](test::Weights& w) {
    w.erase("decoder.resblocks.4.activations.3.upsample.filter");
  }), "decoder.resblocks.4.activations.3.upsample.filter");
  test::expectLoadError(loadAudio, edited("shape", [](test::Weights& w) {
    w["decoder.resblocks.0.convs2.1.bias"] = T::zeros({3});
  }), "decoder.resblocks.0.convs2.1.bias");
  test::expectLoadError(loadAudio, edited("extra", [](test::Weights& w) {
    w["decoder.resblocks.0.convs1.3.bias"] = T::zeros({16});
  }), "decoder.resblocks.0.convs1.3.bias");
  // No latent statistics anywhere: the error names the file.
  const std::string plain = test::diffusionData("h3_audio_tiny.safetensors");
  test::expectLoadError([](const std::string& p) { diffusion::H3AudioDecoder::load(p); },
                        edited("nostats", [](test::Weights&) {}), "latents_mean");
  EXPECT_THROW(diffusion::H3AudioDecoder::load(plain, audioConfig()).decode(T::zeros({2, 31, 4})), Error);
}
