// gizml::diffusion::ZImageDit on ComfyUI's FP8 files, against tests/reference/make_dit_fp8_fixtures.py:
// the tiny DiT of make_dit_fixtures.py with its linear weights quantized per tensor to
// float8_e4m3fn beside their scales (x_embedder plain float8_e5m2), in ComfyUI's old layout
// (scale_weight, scale_input, the scaled_fp8 marker) and its newer one (weight_scale, comfy_quant),
// run by diffusers in float32 on the dequantized weights (code times scale).
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gizml/safetensors.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "diffusion/weight_fixture.h"

using namespace gizml;

namespace {

// As the BF16 fixture's (z_image_dit_test.cpp): the same network and orders of summation on other
// weights. Measured (x86-64, release build): 3.3e-6 at sigma 0.9, 1.6e-5 at sigma 0.3.
constexpr double kTolerance = 5e-5;

diffusion::ZImageConfig tinyConfig() {
  diffusion::ZImageConfig c;
  c.ropeAxes = {4, 8, 12};
  return c;
}

void expectLoadError(const std::string& path, const std::string& tensorName) {
  test::expectLoadError([](const std::string& p) { diffusion::ZImageDit::load(p, tinyConfig()); }, path, tensorName);
}

}  // namespace

TEST(ZImageDitFp8, BothComfyLayoutsForwardAsDiffusersOnTheDequantizedWeights) {
  const auto input = llm::loadSafetensors(test::diffusionData("dit_tiny_case.safetensors"));
  const auto expected = llm::loadSafetensors(test::diffusionData("dit_tiny_fp8_case.safetensors"));
  const diffusion::ZImageDit old = diffusion::ZImageDit::load(test::diffusionData("dit_tiny_fp8.safetensors"), tinyConfig());
  const diffusion::ZImageDit mixed =
      diffusion::ZImageDit::load(test::diffusionData("dit_tiny_fp8_mixed.safetensors"), tinyConfig());
  const std::vector<float> sigmas = input.at("sigmas").toFloats();
  for (size_t i = 0; i < sigmas.size(); ++i) {
    const T::Tensor& want = expected.at("out" + std::to_string(i));
    const T::Tensor a = old.forward(input.at("latent"), sigmas[i], input.at("caption"));
    const T::Tensor b = mixed.forward(input.at("latent"), sigmas[i], input.at("caption"));
    ASSERT_EQ(a.shape(), want.shape());
    const double err = test::maxAbsDiff(a, want);
    std::printf("ZImageDit tiny FP8, sigma %g: max |gizml - diffusers| = %.3g\n", double(sigmas[i]), err);
    EXPECT_LE(err, kTolerance);
    EXPECT_EQ(test::maxAbsDiff(a, b), 0.0) << "the two layouts hold the same weights";
  }
}

TEST(ZImageDitFp8, ScalesOnlyOnFp8AndKnownFormats) {
  // test::editedWeights rewrites FP8 as F32 (the dequantized codes): a scale on an F32 weight.
  expectLoadError(test::editedWeights("dit_tiny_fp8.safetensors", "fp8_as_f32", [](auto&) {}),
                  "t_embedder.mlp.0.weight");
  expectLoadError(test::editedWeights("dit_tiny.safetensors", "bf16_scaled",
                                      [](auto& w) { w["layers.1.attention.out.weight_scale"] = T::scalar(0.5); }),
                  "layers.1.attention.out.weight");
  // A format not read (ComfyUI's NVFP4); INT8's on a weight that is not I8.
  const auto withFormat = [](const std::string& json) {
    return [json](auto& w) {
      std::vector<double> bytes(json.begin(), json.end());
      w.at("t_embedder.mlp.0.comfy_quant") = T::tensor({int64_t(bytes.size())}, bytes, DType::U8);
    };
  };
  expectLoadError(test::editedWeights("dit_tiny_fp8_mixed.safetensors", "fp8_nvfp4_format",
                                      withFormat(R"({"format": "nvfp4"})")),
                  "t_embedder.mlp.0.comfy_quant");
  expectLoadError(test::editedWeights("dit_tiny_fp8_mixed.safetensors", "fp8_int8_format",
                                      withFormat(R"({"format": "int8_tensorwise"})")),
                  "t_embedder.mlp.0.weight");
  expectLoadError(test::editedWeights("dit_tiny.safetensors", "orphan_scale",
                                      [](auto& w) { w["layers.0.feed_forward.w9.scale_weight"] = T::scalar(1.0); }),
                  "layers.0.feed_forward.w9.scale_weight");
}
