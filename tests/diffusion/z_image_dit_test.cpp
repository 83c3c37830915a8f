// gizml::diffusion::ZImageDit against tests/reference/make_dit_fixtures.py: a tiny Z-Image DiT
// (dim 48, 2 heads of 24, rope axes [4, 8, 12], 2 layers, 1 noise and 1 context refiner, BF16
// weights in ComfyUI's names) run by diffusers' ZImageTransformer2DModel in float32 on a seeded
// latent [1, 16, 6, 10] and caption of 7 tokens, at two sigmas; the outputs negated as ComfyUI
// returns them. Bad files: a gizml::Error naming the file and the tensor.
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gizml/safetensors.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "diffusion/weight_fixture.h"

using namespace gizml;

namespace {

// The outputs are within about [-3.7, 3.7]; torch sums its matmuls, norms and attention in other
// orders, and its exp, sin and cos differ from libm's in the last bit, which the time sinusoid's
// arguments (up to 1000 t radians) magnify: the error grows as sigma falls. Measured (x86-64,
// release build): 2.7e-6 at sigma 0.9, 1.7e-5 at sigma 0.3.
constexpr double kTolerance = 5e-5;

std::string dataPath(const std::string& name) { return test::diffusionData(name); }

const std::map<std::string, T::Tensor>& fixtureCase() {
  static const std::map<std::string, T::Tensor> c = llm::loadSafetensors(dataPath("dit_tiny_case.safetensors"));
  return c;
}

diffusion::ZImageConfig tinyConfig() {
  diffusion::ZImageConfig c;
  c.ropeAxes = {4, 8, 12};
  return c;
}

using test::maxAbsDiff;

std::string editedWeights(const std::string& name, const std::function<void(test::Weights&)>& edit) {
  return test::editedWeights("dit_tiny.safetensors", "dit_" + name, edit);
}

void expectLoadError(const std::string& path, const std::string& tensorName) {
  test::expectLoadError([](const std::string& p) { diffusion::ZImageDit::load(p, tinyConfig()); }, path, tensorName);
}

}  // namespace

TEST(ZImageDit, ForwardAsDiffusers) {
  const diffusion::ZImageDit dit = diffusion::ZImageDit::load(dataPath("dit_tiny.safetensors"), tinyConfig());
  EXPECT_EQ(dit.channels(), 16);
  EXPECT_EQ(dit.captionDim(), 32);
  EXPECT_EQ(dit.dim(), 48);
  const std::vector<float> sigmas = fixtureCase().at("sigmas").toFloats();
  ASSERT_EQ(sigmas.size(), 2u);
  for (size_t i = 0; i < sigmas.size(); ++i) {
    const T::Tensor& expected = fixtureCase().at("out" + std::to_string(i));
    const T::Tensor out = dit.forward(fixtureCase().at("latent"), sigmas[i], fixtureCase().at("caption"));
    ASSERT_EQ(out.shape(), expected.shape());
    const double err = maxAbsDiff(out, expected);
    std::printf("ZImageDit tiny, sigma %g: max |gizml - diffusers| = %.3g\n", double(sigmas[i]), err);
    EXPECT_LE(err, kTolerance);
  }
}

// W8A8 linears (ZImageConfig::Linears::Int8) against the F32 forward and diffusers: the blocks'
// activations and weights rounded to 8 bits after the Hadamard rotation. Relative error
// max |int8 - f32| / max |f32|; measured (x86-64, release): 1.35e-2 at sigma 0.9, 1.62e-2 at sigma 0.3.
constexpr double kInt8Relative = 3e-2;

TEST(ZImageDit, Int8LinearsNearF32) {
  diffusion::ZImageConfig config = tinyConfig();
  const diffusion::ZImageDit f32 = diffusion::ZImageDit::load(dataPath("dit_tiny.safetensors"), config);
  config.linears = diffusion::ZImageConfig::Linears::Int8;
  const diffusion::ZImageDit int8 = diffusion::ZImageDit::load(dataPath("dit_tiny.safetensors"), config);
  const std::vector<float> sigmas = fixtureCase().at("sigmas").toFloats();
  for (size_t i = 0; i < sigmas.size(); ++i) {
    const T::Tensor& expected = fixtureCase().at("out" + std::to_string(i));
    const T::Tensor reference = f32.forward(fixtureCase().at("latent"), sigmas[i], fixtureCase().at("caption"));
    const T::Tensor out = int8.forward(fixtureCase().at("latent"), sigmas[i], fixtureCase().at("caption"));
    ASSERT_EQ(out.shape(), expected.shape());
    const double scale = reference.abs().max().item();
    const double vsF32 = maxAbsDiff(out, reference) / scale, vsDiffusers = maxAbsDiff(out, expected) / scale;
    std::printf("ZImageDit tiny INT8, sigma %g: relative to f32 %.3g, to diffusers %.3g\n", double(sigmas[i]), vsF32,
                vsDiffusers);
    EXPECT_LE(vsF32, kInt8Relative);
    EXPECT_LE(vsDiffusers, kInt8Relative);
  }
}

TEST(ZImageDit, BadFilesNameTheTensor) {
  expectLoadError(editedWeights("missing", [](auto& w) { w.erase("layers.1.feed_forward.w3.weight"); }),
                  "layers.1.feed_forward.w3.weight");
  expectLoadError(editedWeights("shape",
                                [](auto& w) { w.at("context_refiner.0.attention.k_norm.weight") = T::zeros({48}); }),
                  "context_refiner.0.attention.k_norm.weight");
  expectLoadError(editedWeights("dtype", [](auto& w) { w.at("x_pad_token") = T::zeros({1, 48}, DType::I32); }),
                  "x_pad_token");
  expectLoadError(editedWeights("extra", [](auto& w) { w["norm_final.weight"] = T::zeros({48}); }),
                  "norm_final.weight");
  // A head dim other than the sum of the RoPE axes.
  expectLoadError(editedWeights("heads",
                                [](auto& w) { w.at("layers.0.attention.q_norm.weight") = T::zeros({16}); }),
                  "layers.0.attention.q_norm.weight");
}

TEST(ZImageDit, BadInputs) {
  const diffusion::ZImageDit dit = diffusion::ZImageDit::load(dataPath("dit_tiny.safetensors"), tinyConfig());
  const T::Tensor caption = fixtureCase().at("caption");
  EXPECT_THROW(dit.forward(T::zeros({1, 4, 6, 10}), 0.5, caption), Error);
  EXPECT_THROW(dit.forward(T::zeros({1, 16, 5, 10}), 0.5, caption), Error);
  EXPECT_THROW(dit.forward(T::zeros({1, 16, 6, 10}), 0.5, T::zeros({7, 16})), Error);
  EXPECT_THROW(dit.forward(T::zeros({1, 16, 6, 10}), 1.5, caption), Error);
}
