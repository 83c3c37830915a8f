// gizml::diffusion::ZImagePipeline and convertZImageText against
// tests/reference/make_zimage_pipeline_fixtures.py: a tiny Qwen3 text encoder (hidden 32, 3
// layers, Qwen3's real tokenizer) in transformers, the tiny DiT of make_dit_fixtures.py in
// diffusers, ComfyUI's noise and res_multistep, and a tiny 4-level FLUX.1 VAE decoder, for one
// prompt at seed 42: every stage at 64 x 64, and the 256 x 256 golden picture.
#include <gizhw/gpu.h>
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gizml/image.h>
#include <gizml/safetensors.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "diffusion/weight_fixture.h"
#include "diffusion/zimage_tiny.h"
#include "common/test_paths.h"

using namespace gizml;
namespace fs = std::filesystem;

namespace {

using test::zimage::data;
using test::zimage::kPrompt;
using test::zimage::pipeline;
using test::zimage::textFolder;
using test::zimage::textHf;
using test::pixelsWithinOne;  // measured: every pixel within 1/255, at 64 x 64 and 256 x 256

// The text states: F16 weights (the tiny model's are BF16 values, F16 holds nearly all of them)
// against transformers in f32, summed in other orders. Measured (x86-64, release): 1.3e-6 of
// states up to 5.5.
constexpr double kTextTolerance = 2e-5;
// A step's latent from the reference's caption: the DiT's own error (z_image_dit_test.cpp, up to
// 1.7e-5 a call) carried over the steps. Measured: 3.0e-6 after the last step, of latents up to
// 5.6.
constexpr double kLatentTolerance = 5e-5;
// The VAE's output from the reference's last latent. Measured: 2.0e-6 of values up to 2.3.
constexpr double kDecodedTolerance = 2e-5;

const std::map<std::string, T::Tensor>& fixture() {
  static const auto c = llm::loadSafetensors(data("zimage_pipeline_case.safetensors"));
  return c;
}

std::vector<uint8_t> fixtureBytes() {
  const std::vector<float> b = fixture().at("bytes").toFloats();
  return std::vector<uint8_t>(b.begin(), b.end());
}

void expectError(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(ZImageText, ConvertKeepsAllButTheLastLayer) {
  const nlohmann::json manifest = nlohmann::json::parse(std::ifstream(textFolder() + "/manifest.json"));
  EXPECT_EQ(manifest["kept_layers"], 2);
  for (const nlohmann::json& t : manifest["tensors"]) {
    const std::string name = t["name"];
    EXPECT_EQ(name.find("model.layers.2."), std::string::npos) << name;
    EXPECT_NE(name, "model.norm.weight");
    EXPECT_NE(name, "lm_head.weight");
    if (name == "model.embed_tokens.weight") {
      EXPECT_EQ(t["format"], "f16");  // tied, yet not the head's width
    }
  }
  // Its states are those of the whole model converted at 16 bits and loaded with 2 layers.
  const std::string whole = test::temporary("zimage_text_whole");
  fs::remove_all(whole);
  llm::convert(textHf("whole"), whole, llm::Bits{.layers = 16, .head = 16});
  const llm::Model text = llm::load(textFolder());
  const std::vector<llm::TokenId> tokens = pipeline().promptTokens(kPrompt);
  EXPECT_EQ(text.hiddenSize(), 32);
  EXPECT_EQ(text.engine(1, 64).hidden(tokens).toFloats(),
            llm::load(whole, {.layers = 2}).engine(1, 64).hidden(tokens).toFloats());
  expectError([&] { llm::load(textFolder(), {.layers = 3}); }, {textFolder(), "first 2 layers", "not 3"});
  llm::Request request;
  request.prompt = tokens;
  expectError([&] { text.engine(1, 64).add(request); }, {"first 2 layers"});
}

TEST(ZImageText, RefusesOtherModels) {
  const std::string out = test::temporary("zimage_text_refused");
  const std::string llama = test_paths::testData() + "/models/llama/hf";
  expectError([&] { diffusion::convertZImageText(llama, out); }, {llama, "qwen3", "llama"});
  const std::string oneLayer = textHf("one_layer", [](nlohmann::json& c) { c["num_hidden_layers"] = 1; });
  expectError([&] { diffusion::convertZImageText(oneLayer, out); }, {oneLayer, "1 layer"});
  expectError([&] { diffusion::convertZImageText("/nonexistent/qwen3", out); }, {"/nonexistent/qwen3"});
}

TEST(ZImagePipeline, StagesAsTheReference) {
  const diffusion::ZImagePipeline& p = pipeline();
  EXPECT_EQ(p.sizeMultiple(), 16);
  EXPECT_EQ(p.captionDim(), 32);
  const std::vector<llm::TokenId> tokens = p.promptTokens(kPrompt);
  const T::Tensor wantTokens = fixture().at("tokens").contiguous();
  ASSERT_EQ(static_cast<int64_t>(tokens.size()), wantTokens.shape()[0]);
  for (size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(tokens[i], wantTokens.data<int64_t>()[i]) << i;

  const T::Tensor caption = p.condition(kPrompt);
  const double textError = test::maxAbsDiff(caption, fixture().at("text"));
  EXPECT_LE(textError, kTextTolerance);

  EXPECT_EQ(diffusion::flowSigmas(8, 3.0), fixture().at("sigmas").toFloats());
  EXPECT_EQ(diffusion::torchRandn(42, {1, 16, 8, 8}).toFloats(), fixture().at("noise").toFloats());

  // Sampling from the reference's caption, step by step.
  const std::vector<float> latents = fixture().at("latents").toFloats();
  const size_t size = 16 * 8 * 8;
  ASSERT_EQ(latents.size(), 8 * size);
  std::vector<double> stepErrors;
  const T::Tensor latent = p.sampleWith(fixture().at("text"), 42, 64, 64, [&](const diffusion::ZImageStep& s) {
    EXPECT_EQ(s.step, static_cast<int64_t>(stepErrors.size()));
    EXPECT_EQ(s.steps, 8);
    EXPECT_EQ(s.sigma, fixture().at("sigmas").toFloats()[static_cast<size_t>(s.step)]);
    const std::vector<float> got = s.latent.toFloats();
    double worst = 0;
    for (size_t i = 0; i < size; ++i)
      worst = std::max(worst, std::fabs(double(got[i]) - latents[static_cast<size_t>(s.step) * size + i]));
    stepErrors.push_back(worst);
  });
  ASSERT_EQ(stepErrors.size(), 8u);
  for (size_t i = 0; i < stepErrors.size(); ++i) EXPECT_LE(stepErrors[i], kLatentTolerance) << "step " << i;
  EXPECT_EQ(latent.shape(), (T::Shape{1, 16, 8, 8}));

  // Decoding the reference's last latent.
  const T::Tensor last = T::tensor({1, 16, 8, 8}, std::vector<double>(latents.end() - size, latents.end()));
  const double decodedError =
      test::maxAbsDiff(diffusion::FluxVae::load(data("vae_tiny8.safetensors")).decode(last), fixture().at("decoded"));
  EXPECT_LE(decodedError, kDecodedTolerance);
  const int64_t decodedClose = pixelsWithinOne(p.decode(last), fixtureBytes());
  std::printf("text %.2e, last step %.2e, decoded %.2e; decoded pixels within 1/255: %lld of 4096\n", textError,
              stepErrors.back(), decodedError, static_cast<long long>(decodedClose));
  EXPECT_EQ(decodedClose, 64 * 64);
}

TEST(ZImagePipeline, PaintsTheReferencePicture) {
  // The whole pipeline from the prompt: its errors reach the bytes, where a value near a step of
  // 1/255 may land on either side, so pixels are counted within 1/255 of the reference's.
  std::vector<diffusion::ZImageStep> steps;
  diffusion::ZImageTimes times;
  const image::Image got = pipeline().paint(kPrompt, 42, 64, 64, [&](const diffusion::ZImageStep& s) { steps.push_back(s); },
                                            &times);
  EXPECT_EQ(got.width, 64);
  EXPECT_EQ(got.height, 64);
  EXPECT_EQ(steps.size(), 8u);
  EXPECT_GT(times.sample, 0.0);
  const int64_t close = pixelsWithinOne(got, fixtureBytes());
  std::printf("64 x 64: %lld of 4096 pixels within 1/255\n", static_cast<long long>(close));
  EXPECT_GE(close, 4096 * 99 / 100);
}

TEST(ZImagePipeline, PaintsTheGoldenPicture) {
  // tests/data/diffusion/zimage_tiny_seed42.png: the reference's 256 x 256 picture of the prompt.
  std::ifstream file(data("zimage_tiny_seed42.png"), std::ios::binary);
  const std::vector<uint8_t> png((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const image::Image want = image::decode(png);
  ASSERT_EQ(want.width, 256);
  const image::Image got = pipeline().paint(kPrompt, 42, 256, 256);
  const int64_t close = pixelsWithinOne(got, want.pixels);
  std::printf("256 x 256: %lld of 65536 pixels within 1/255\n", static_cast<long long>(close));
  EXPECT_GE(close, 65536 * 99 / 100);
}

// The pipeline with W8A8 DiT linears (ZImageConfig::Linears::Int8) paints nearly the F32
// pipeline's picture: each DiT call within about 1.6% (z_image_dit_test.cpp) over 8 steps.
// Measured (x86-64, release) at 64 x 64: 4082 of 4096 pixels within 1/255, all within 2/255;
// asserted with margin: 99% within 1/255, all within 4/255.
TEST(ZImagePipeline, Int8LinearsPaintNearlyTheF32Picture) {
  diffusion::ZImagePipelineConfig config = test::zimage::config();
  config.dit.linears = diffusion::ZImageConfig::Linears::Int8;
  const diffusion::ZImagePipeline int8 = diffusion::ZImagePipeline::load(
      data("dit_tiny.safetensors"), textFolder(), data("vae_tiny8.safetensors"), config);
  const image::Image got = int8.paint(kPrompt, 42, 64, 64), want = pipeline().paint(kPrompt, 42, 64, 64);
  ASSERT_EQ(got.pixels.size(), want.pixels.size());
  int worst = 0;
  std::vector<int64_t> within(256, 0);  // within[k]: pixels whose channels are all within k/255
  for (size_t i = 0; i + 2 < got.pixels.size(); i += 3) {
    int d = 0;
    for (size_t c = 0; c < 3; ++c) d = std::max(d, std::abs(int(got.pixels[i + c]) - int(want.pixels[i + c])));
    worst = std::max(worst, d);
    for (int k = d; k < 256; ++k) ++within[static_cast<size_t>(k)];
  }
  std::printf("INT8 vs F32, 64 x 64: within 1/255 %lld, 4/255 %lld, 8/255 %lld of 4096; worst %d/255\n",
              static_cast<long long>(within[1]), static_cast<long long>(within[4]), static_cast<long long>(within[8]),
              worst);
  EXPECT_GE(within[1], 4096 * 99 / 100);
  EXPECT_LE(worst, 4);
}

// lowMemory (the text encoder and the DiT loaded by each call and let go after it) changes where
// the parts are held, not what they compute: the same states, latent and picture, bit for bit.
TEST(ZImagePipeline, LowMemoryPaintsTheSamePicture) {
  diffusion::ZImagePipelineConfig config = test::zimage::config();
  config.lowMemory = true;
  const diffusion::ZImagePipeline low = diffusion::ZImagePipeline::load(
      data("dit_tiny.safetensors"), textFolder(), data("vae_tiny8.safetensors"), config);
  EXPECT_TRUE(low.config().lowMemory);
  EXPECT_EQ(low.promptTokens(kPrompt), pipeline().promptTokens(kPrompt));
  const T::Tensor caption = low.condition(kPrompt);
  EXPECT_EQ(test::maxAbsDiff(caption, pipeline().condition(kPrompt)), 0.0);
  EXPECT_EQ(test::maxAbsDiff(low.sampleWith(caption, 42, 64, 64), pipeline().sampleWith(caption, 42, 64, 64)), 0.0);
  EXPECT_EQ(low.paint(kPrompt, 42, 64, 64).pixels, pipeline().paint(kPrompt, 42, 64, 64).pixels);
  // Its mistakes are found at load as without it.
  const std::string dit = data("dit_tiny.safetensors"), vae = data("vae_tiny8.safetensors");
  expectError([&] { diffusion::ZImagePipeline::load("/nonexistent/dit.safetensors", textFolder(), vae, config); },
              {"/nonexistent/dit.safetensors"});
  expectError([&] { diffusion::ZImagePipeline::load(dit, "/nonexistent/text", vae, config); }, {"/nonexistent/text"});
}

// On a GPU (the emulator in ctest's emulator_test_diffusion) with W8A8 DiT linears: the
// reference's picture as nearly as the host's INT8 pipeline paints the F32 one. Measured on the
// emulator (x86-64, release): 4082 of 4096 pixels within 1/255 of the reference's.
TEST(ZImagePipelineGpu, Int8PaintsNearlyTheReferencePicture) {
  const auto gpu = gizhw::gpu::open();
  if (!gpu) GTEST_SKIP() << "no GPU found: GPU test skipped";
  diffusion::ZImagePipelineConfig config = test::zimage::config();
  config.dit.linears = diffusion::ZImageConfig::Linears::Int8;
  config.gpu = *gpu;
  const diffusion::ZImagePipeline p = diffusion::ZImagePipeline::load(
      data("dit_tiny.safetensors"), textFolder(), data("vae_tiny8.safetensors"), config);
  int64_t steps = 0;
  const image::Image got = p.paint(kPrompt, 42, 64, 64, [&](const diffusion::ZImageStep& s) {
    EXPECT_TRUE(s.latent.onGpu());
    ++steps;
  });
  EXPECT_EQ(steps, 8);
  const int64_t close = pixelsWithinOne(got, fixtureBytes());
  std::printf("on %s, INT8, 64 x 64: %lld of 4096 pixels within 1/255 of the reference\n", gpu->describe().c_str(),
              static_cast<long long>(close));
  EXPECT_GE(close, 4096 * 99 / 100);
}

TEST(ZImagePipeline, Errors) {
  const diffusion::ZImagePipeline& p = pipeline();
  expectError([&] { p.paint(kPrompt, 42, 72, 64); }, {"72 x 64", "multiples of 16"});
  expectError([&] { p.sampleWith(p.condition(kPrompt), 42, 64, 0); }, {"64 x 0", "multiples of 16"});
  expectError([&] { p.sampleWith(T::zeros({3, 64}), 42, 64, 64); }, {"[3, 64]", "32"});
  expectError([&] { p.decode(T::zeros({2, 16, 4, 4})); }, {"one latent"});
  // A text encoder 64 wide (the Qwen3 fixture of tests/llm) for a DiT reading 32.
  const fs::path hf = test::temporary("zimage_wide_hf");
  fs::remove_all(hf);
  fs::copy(test_paths::testData() + "/models/qwen3/hf", hf);
  test::zimage::copyTokenizer(hf);
  const std::string wide = test::temporary("zimage_wide");
  fs::remove_all(wide);
  diffusion::convertZImageText(hf.string(), wide);
  const std::string dit = data("dit_tiny.safetensors"), vae = data("vae_tiny8.safetensors");
  expectError([&] { diffusion::ZImagePipeline::load(dit, wide, vae, test::zimage::config()); }, {wide, dit, "64", "32"});
  expectError([&] { diffusion::ZImagePipeline::load("/nonexistent/dit.safetensors", textFolder(), vae, test::zimage::config()); },
              {"/nonexistent/dit.safetensors"});
  expectError([&] { diffusion::ZImagePipeline::load(dit, "/nonexistent/text", vae, test::zimage::config()); }, {"/nonexistent/text"});
  expectError([&] { diffusion::ZImagePipeline::load(dit, textFolder(), "/nonexistent/ae.safetensors", test::zimage::config()); },
              {"/nonexistent/ae.safetensors"});
}

// The tiny model as giz paint's MODEL folder (zimage_tiny.h; docs/serve.md, "Images") under
// $GIZML_ZIMAGE_FOLDER, for the command-line tests of tests/CMakeLists.txt: model/ with the DiT,
// the VAE and zimage.json (the tiny RoPE axes), and text_hf/, the encoder's Hugging Face folder,
// which giz convert --z-image-text turns into model/text_encoders/. Skipped when the variable is unset.
TEST(ZImageTinyFolder, Write) {
  const std::optional<fs::path> made = test::freshModelFolder("GIZML_ZIMAGE_FOLDER");
  if (!made) GTEST_SKIP() << "GIZML_ZIMAGE_FOLDER is not set";
  const fs::path& folder = *made;
  fs::copy_file(data("dit_tiny.safetensors"), folder / "model" / "diffusion_models" / "z_image_tiny.safetensors");
  fs::copy_file(data("vae_tiny8.safetensors"), folder / "model" / "vae" / "ae.safetensors");
  const std::vector<int64_t>& axes = test::zimage::config().dit.ropeAxes;
  std::ofstream(folder / "model" / "zimage.json") << nlohmann::json{{"rope_axes", axes}}.dump() << "\n";
  test::zimage::writeTextHf(folder / "text_hf");
}

// giz paint's picture ($GIZML_PAINTED_PNG, painted by the tests of tests/CMakeLists.txt from the
// folder above at 256 x 256 with seed 42) against the golden one, as PaintsTheGoldenPicture.
TEST(ZImageTinyFolder, GizPaintedTheGoldenPicture) {
  const char* painted = std::getenv("GIZML_PAINTED_PNG");
  if (!painted) GTEST_SKIP() << "GIZML_PAINTED_PNG is not set";
  const auto read = [](const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    EXPECT_TRUE(file) << path;
    return image::decode(std::vector<uint8_t>((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>()));
  };
  const image::Image want = read(data("zimage_tiny_seed42.png")), got = read(painted);
  ASSERT_EQ(got.width, 256);
  ASSERT_EQ(got.height, 256);
  const int64_t close = pixelsWithinOne(got, want.pixels);
  std::printf("giz paint, 256 x 256: %lld of 65536 pixels within 1/255\n", static_cast<long long>(close));
  EXPECT_GE(close, 65536 * 99 / 100);
}
