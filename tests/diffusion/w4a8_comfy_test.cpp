// ComfyUI's 4-bit W4A8 files ("asym_w4a8_int8", comfy_kitchen's AsymW4A8Int8Layout) against
// comfy_kitchen, which makes and runs them (tests/reference/make_w4a8_fixtures.py): layers of 4-bit
// codebook codes (FP8 group scales, or their bytes as U8), 6-bit uniform codes, 4-bit uniform codes
// and an asymmetric one with a correction, ConvRot over 256, 64 and 16 inputs; their INT8 grid bit
// for bit, dequantized and multiplied as comfy_kitchen does; the tiny MiniMax H3 with its block
// linears so quantized, against diffusers with comfy_kitchen's W4A8 linears; bad files named.
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gizml/safetensors.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "diffusion/int8_linear.h"
#include "diffusion/weight_file.h"
#include "diffusion/weight_fixture.h"

using namespace gizml;

namespace {

struct Layer {
  const char* name;
  int64_t out, in, rotation;
  bool corrected;  // comfy_kitchen runs it as a float linear on the dequantized weight
};
const Layer kLayers[] = {{"w0", 32, 256, 256, false}, {"w1", 16, 512, 256, false}, {"w2", 24, 256, 64, false},
                         {"w3", 8, 256, 256, true},   {"w4", 16, 256, 16, false}};

const test::Weights& layersCase() {
  static const test::Weights c = llm::loadSafetensors(test::diffusionData("w4a8_comfy_layers_case.safetensors"));
  return c;
}

double relative(const T::Tensor& got, const T::Tensor& want) {
  return test::maxAbsDiff(got, want) / want.abs().max().item();
}

}  // namespace

// The grid: the same float products rounded half to even, so the same codes (compared exactly).
// Dequantized: codes times scales (plus the correction), rotated back by a butterfly where
// comfy_kitchen multiplies by the Hadamard matrix (measured: relative 3.6e-7 at most). The product
// on the grid: Int8Linear as for int8_tensorwise codes (measured: relative 4.2e-7 at most).
TEST(W4a8Comfy, LayersAsComfyKitchen) {
  diffusion::WeightFile f(test::diffusionData("w4a8_comfy_layers.safetensors"), "", "W4A8 layers");
  for (const Layer& l : kLayers) {
    SCOPED_TRACE(l.name);
    const std::string c = l.name;
    const diffusion::StoredWeight w = f.takeStored(c + ".weight", {l.out, l.in});
    const T::Tensor x = layersCase().at(c + ".x");
    double product = 0;
    if (l.corrected) {
      EXPECT_FALSE(w.int8.has_value());
      product = relative(T::matmul(x, w.f32().transpose(0, 1)), layersCase().at(c + ".out"));
    } else {
      ASSERT_TRUE(w.int8.has_value());
      EXPECT_EQ(w.int8->rotation, l.rotation);
      EXPECT_EQ(w.int8->fourBit.has_value(), l.name != std::string("w1"));  // 4 bits kept at 4 bits (w1: 6)
      if (w.int8->fourBit) {
        EXPECT_EQ(w.int8->fourBit->groupScales.dtype(), DType::F16);  // FP8 scales, exact
      }
      EXPECT_EQ(w.int8->grid().cast(DType::F32).toFloats(), layersCase().at(c + ".int8").cast(DType::F32).toFloats());
      product = relative(diffusion::Int8Linear(*w.int8)(x), layersCase().at(c + ".out"));
    }
    const double dequant = relative(w.f32(), layersCase().at(c + ".dequant"));
    std::printf("W4A8 layer %s (%lld x %lld, rotation %lld): dequantized %.3g, product %.3g (comfy_kitchen)\n",
                l.name, static_cast<long long>(l.out), static_cast<long long>(l.in),
                static_cast<long long>(l.rotation), dequant, product);
    EXPECT_LE(dequant, 1e-6);
    EXPECT_LE(product, 1e-5);
  }
  f.requireAllTaken();
}

// Bad W4A8 layers are Errors naming the tensor.
TEST(W4a8Comfy, BadLayersNameTheTensor) {
  const auto expectError = [](const std::string& tag, const std::function<void(test::Weights&)>& edit,
                              const std::string& named) {
    const std::string path = test::editedWeights("w4a8_comfy_layers.safetensors", "w4a8_" + tag, edit);
    test::expectLoadError(
        [](const std::string& p) {
          diffusion::WeightFile f(p, "", "W4A8 layers");
          f.takeStored("w0.weight", {32, 256});
        },
        path, named);
  };
  expectError("packed", [](test::Weights& w) { w["w0.weight"] = T::zeros({32, 100}, DType::I8); }, "w0.weight");
  expectError("scales", [](test::Weights& w) { w["w0.weight_s_rel"] = T::zeros({32, 8}); }, "w0.weight_s_rel");
  expectError("channel", [](test::Weights& w) { w.erase("w0.weight_s_channel"); }, "w0.weight_s_channel");
  expectError("nan", [](test::Weights& w) { w["w0.weight_s_channel"] = T::full({32}, NAN); }, "w0.weight_s_channel");
  expectError("codebook", [](test::Weights& w) { w["w0.weight_codebook"] = T::zeros({8}); }, "w0.weight_codebook");
}

// The tiny MiniMax H3 (make_h3_int8_fixtures.py's, pruned, under model.diffusion_model.) with
// each block's qkv, out and fc1 as 4-bit W4A8 (fc2's 40 inputs are no multiple of 16: BF16):
// against diffusers with comfy_kitchen's w4a8_int8_linear on the stored tensors (measured 9.5e-7)
// and on the dequantized weights in F32 (the activations' 8 bits; outputs up to 3.5, 1.2e-2).
TEST(W4a8Comfy, H3BlocksRunTheirCodes) {
  const test::Weights ref = llm::loadSafetensors(test::diffusionData("h3_tiny_w4a8_case.safetensors"));
  const test::Weights inputs = llm::loadSafetensors(test::diffusionData("h3_tiny_case.safetensors"));
  diffusion::H3Condition c;
  c.text = inputs.at("text");
  for (float t : inputs.at("text_tags").cast(DType::F32).toFloats()) c.textTags.push_back(static_cast<int>(t));
  c.keyframes.push_back({inputs.at("keyframe"), false});
  const diffusion::H3Model m = diffusion::H3Model::load(test::diffusionData("h3_tiny_w4a8.safetensors"));
  const diffusion::H3Latents x = m.forward({inputs.at("video"), inputs.at("audio")}, inputs.at("t_video").item(),
                                           inputs.at("t_audio").item(), c);
  const double w4v = test::maxAbsDiff(x.video, ref.at("w4a8_video_out")),
               w4a = test::maxAbsDiff(x.audio, ref.at("w4a8_audio_out")),
               f32v = test::maxAbsDiff(x.video, ref.at("f32_video_out")),
               f32a = test::maxAbsDiff(x.audio, ref.at("f32_audio_out"));
  std::printf("H3 W4A8 file: max |ours - comfy_kitchen W4A8| video %.3g, audio %.3g; - F32 video %.3g, audio %.3g\n",
              w4v, w4a, f32v, f32a);
  EXPECT_LT(std::max(w4v, w4a), 1e-4);  // one activation code a step off would be about 1e-3
  EXPECT_LT(std::max(f32v, f32a), 3e-2);
}
