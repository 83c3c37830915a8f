// ComfyUI's INT8 files ("int8_tensorwise", ConvRot) against comfy_kitchen, which makes and runs
// them (tests/reference/make_klein_int8_fixtures.py): layers rotated over 256, 64 and 16 inputs
// and one not rotated, their codes read as stored (WeightFile), dequantized as comfy_kitchen's
// TensorWiseINT8Layout.dequantize and multiplied as its int8_linear; the tiny FLUX.2 klein with
// its block linears so quantized, against diffusers on the dequantized weights and in INT8
// linears; the layers on a GPU (the emulator in ctest's emulator_test_diffusion); bad files named.
#include <gizhw/gpu.h>
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gizml/safetensors.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "diffusion/int8_linear.h"
#include "diffusion/weight_file.h"
#include "diffusion/weight_fixture.h"

using namespace gizml;

namespace {

struct Layer {
  int64_t out, in, rotation;
};
const Layer kLayers[] = {{8, 512, 256}, {6, 192, 64}, {5, 48, 16}, {4, 64, 1}};

const std::map<std::string, T::Tensor>& layersCase() {
  static const std::map<std::string, T::Tensor> c =
      llm::loadSafetensors(test::diffusionData("int8_comfy_layers_case.safetensors"));
  return c;
}

// "cN": layer N's names in the fixtures.
std::string layerName(size_t i) {
  std::string name = "c";
  name += std::to_string(i);
  return name;
}

double relative(const T::Tensor& got, const T::Tensor& want) {
  return test::maxAbsDiff(got, want) / want.abs().max().item();
}

}  // namespace

// Dequantized: codes times scales, rotated back by a butterfly where comfy_kitchen multiplies by
// the Hadamard matrix, so the last bits differ (measured: relative 1.6e-7 at most). The INT8
// product: the same weight codes and integer sums; the activations rotated by our butterfly
// (torch: a matmul) and quantized to the same codes here (measured: relative 4.2e-7 at most,
// the scales' last bits). Against the F32 product on the dequantized weight: the activations'
// 8 bits (measured: 0.2-0.75 %).
TEST(Int8Comfy, LayersAsComfyKitchen) {
  diffusion::WeightFile f(test::diffusionData("int8_comfy_layers.safetensors"), "", "INT8 layers");
  for (size_t i = 0; i < std::size(kLayers); ++i) {
    const Layer& l = kLayers[i];
    const std::string c = layerName(i);
    const diffusion::StoredWeight w = f.takeStored(c + ".weight", {l.out, l.in});
    ASSERT_TRUE(w.int8.has_value()) << c;
    EXPECT_EQ(w.int8->rotation, l.rotation) << c;
    EXPECT_EQ(w.int8->codes.dtype(), DType::I8) << c;
    const T::Tensor x = layersCase().at(c + ".x");
    const T::Tensor dequant = w.f32(), out = diffusion::Int8Linear(*w.int8)(x);
    const T::Tensor exact = T::matmul(x, layersCase().at(c + ".dequant").transpose(0, 1));
    const double d = relative(dequant, layersCase().at(c + ".dequant")), p = relative(out, layersCase().at(c + ".out"));
    std::printf("INT8 layer %s (%lld x %lld, rotation %lld): dequantized %.3g, product %.3g (comfy_kitchen); "
                "product against F32 on the dequantized weight %.3g\n",
                c.c_str(), static_cast<long long>(l.out), static_cast<long long>(l.in),
                static_cast<long long>(l.rotation), d, p, relative(out, exact));
    EXPECT_LE(d, 1e-6) << c;
    EXPECT_LE(p, 1e-5) << c;
    EXPECT_LE(relative(out, exact), 3e-2) << c;
  }
  f.requireAllTaken();
}

// The stored codes' layers on a GPU against the host: the same codes, so only the activations'
// rotation (the GPU's F32 matmul for the first rotation of codes not rotated over 256) may round
// a code the other way. Skipped without a GPU.
TEST(Int8ComfyGpu, LayersNearTheHost) {
  const auto gpu = gizhw::gpu::open();
  if (!gpu) GTEST_SKIP() << "no GPU found: GPU test skipped";
  diffusion::WeightFile f(test::diffusionData("int8_comfy_layers.safetensors"), "", "INT8 layers");
  for (size_t i = 0; i < std::size(kLayers); ++i) {
    const std::string c = layerName(i);
    const diffusion::StoredWeight w = f.takeStored(c + ".weight", {kLayers[i].out, kLayers[i].in});
    const diffusion::Int8Linear host(*w.int8);
    const T::Tensor x = layersCase().at(c + ".x");
    const T::Tensor want = host(x), got = host.to(*gpu)(x.on(*gpu));
    EXPECT_TRUE(got.onGpu()) << c;
    const double err = relative(got.host(), want);
    std::printf("INT8 layer %s on %s vs the host: relative %.3g\n", c.c_str(), gpu->describe().c_str(), err);
    EXPECT_LE(err, 1e-5) << c;
  }
}

namespace {

const std::map<std::string, T::Tensor>& kleinCase() {
  static const std::map<std::string, T::Tensor> c =
      llm::loadSafetensors(test::diffusionData("klein2_int8_case.safetensors"));
  return c;
}

}  // namespace

// The tiny klein's INT8 file: in F32 linears (its codes dequantized) as diffusers on the same
// dequantized weights (the F32 tolerance of klein_dit_test.cpp); in INT8 linears (the codes as
// stored, the activations quantized) near it, within the W8A8 error of that test.
TEST(Int8Comfy, KleinFileAsDiffusers) {
  const auto tiny = llm::loadSafetensors(test::diffusionData("klein_tiny_case.safetensors"));
  const std::string path = test::diffusionData("klein2_tiny_int8.safetensors");
  diffusion::KleinConfig config;
  const diffusion::KleinDit f32 = diffusion::KleinDit::load(path, config);
  config.linears = diffusion::ZImageConfig::Linears::Int8;
  const diffusion::KleinDit int8 = diffusion::KleinDit::load(path, config);
  const float sigma = tiny.at("sigmas").toFloats()[0];
  for (const char* run : {"out0", "ref0"}) {
    std::vector<T::Tensor> refs;
    if (std::string(run) == "ref0") refs.push_back(tiny.at("ref0"));
    const T::Tensor& want = kleinCase().at(run);
    const T::Tensor a = f32.forward(tiny.at("latent"), refs, tiny.at("text"), sigma, 0.0f);
    const T::Tensor b = int8.forward(tiny.at("latent"), refs, tiny.at("text"), sigma, 0.0f);
    std::printf("klein INT8 file %s: F32 linears %.3g, INT8 linears %.3g of max |diffusers|\n", run,
                relative(a, want), relative(b, want));
    EXPECT_LE(relative(a, want), 1e-5) << run;
    EXPECT_LE(relative(b, want), 5e-2) << run;
  }
}

namespace {

T::Tensor jsonBytes(const std::string& json) {
  std::vector<double> bytes(json.begin(), json.end());
  return T::tensor({static_cast<int64_t>(bytes.size())}, bytes, DType::U8);
}

void expectTakeError(const std::function<void(test::Weights&)>& edit, const std::string& tag,
                     const std::string& tensorName, int64_t layer = 2) {
  const Layer& l = kLayers[layer];
  const std::string c = layerName(static_cast<size_t>(layer));
  test::expectLoadError(
      [&](const std::string& p) {
        diffusion::WeightFile f(p, "", "INT8 layers");
        f.takeStored(c + ".weight", {l.out, l.in});
      },
      test::editedWeights("int8_comfy_layers.safetensors", "int8_" + tag, edit), tensorName);
}

}  // namespace

TEST(Int8Comfy, BadFilesNameTheTensor) {
  expectTakeError([](auto& w) { w.erase("c2.comfy_quant"); }, "no_quant", "c2.weight");
  expectTakeError([](auto& w) { w.at("c2.comfy_quant") = jsonBytes(R"({"format": "int8_blockwise"})"); },
                  "format", "c2.comfy_quant");
  expectTakeError([](auto& w) { w.at("c2.comfy_quant") = jsonBytes(R"({"format": "float8_e4m3fn"})"); },
                  "fp8_format", "c2.weight");
  expectTakeError(
      [](auto& w) {
        w.at("c2.comfy_quant") = jsonBytes(R"({"format": "int8_tensorwise", "convrot": true, "convrot_groupsize": 8})");
      },
      "group8", "c2.weight");
  expectTakeError(
      [](auto& w) {
        w.at("c2.comfy_quant") = jsonBytes(R"({"format": "int8_tensorwise", "convrot": true, "convrot_groupsize": 64})");
      },
      "group64", "c2.weight");  // 64 does not divide the 48 inputs
  expectTakeError(
      [](auto& w) {
        w.at("c2.comfy_quant") = jsonBytes(R"({"format": "int8_tensorwise", "convrot": true, "convrot_groupsize": 1024})");
      },
      "group1024", "c2.comfy_quant");
  expectTakeError([](auto& w) { w.at("c2.comfy_quant") = jsonBytes(R"({"format": "int8_tensorwise", "convrot": 1})"); },
                  "convrot", "c2.comfy_quant");
  expectTakeError([](auto& w) { w.at("c2.comfy_quant") = jsonBytes("{not json"); }, "json", "c2.comfy_quant");
  expectTakeError([](auto& w) { w.erase("c2.weight_scale"); }, "no_scale", "c2.weight_scale");
  expectTakeError([](auto& w) { w.at("c2.weight_scale") = T::ones({3, 1}); }, "scale_shape", "c2.weight_scale");
  expectTakeError([](auto& w) { w.at("c2.weight_scale") = T::ones({5, 1}, DType::I32); }, "scale_dtype",
                  "c2.weight_scale");
  expectTakeError([](auto& w) { w.at("c2.weight_scale") = T::full({5, 1}, INFINITY); }, "scale_inf",
                  "c2.weight_scale");
  expectTakeError([](auto& w) { w.at("c2.weight") = T::zeros({5, 48}, DType::I32); }, "codes_dtype", "c2.weight");
}
