// gizml::diffusion::KleinPipeline against tests/reference/make_klein_pipeline_fixtures.py:
// diffusers' Flux2KleinPipeline (cfg 1, 4 steps, ComfyUI's noise for seed 42 passed as latents)
// on the tiny text encoder of make_klein_text_fixtures.py, the tiny FLUX.2 VAE of
// make_flux2_vae_fixtures.py (scale 4) and a tiny FLUX.2 [klein] DiT fitting them; a text to
// image at 48 x 32 and an edit of one 70 x 66 picture at 40 x 36: every stage, and the pictures;
// an edit of two pictures: its last latent and picture (all without the step cache, which the
// reference lacks). Also the step cache's and refresh's effects.
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gizml/image.h>
#include <gizml/safetensors.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/expect_error.h"
#include "common/psnr.h"
#include "diffusion/weight_fixture.h"
#include "diffusion/klein_tiny.h"
#include "diffusion/upsampler_tiny.h"

using namespace gizml;
namespace fs = std::filesystem;

namespace {

using test::klein::fixture;
using test::klein::kEditPrompt;
using test::klein::kTextPrompt;
using test::klein::loaded;
using test::klein::picture;
using test::klein::pipeline;
using test::klein::textFolder;
using test::zimage::data;

// The text rows: klein_text_test.cpp's bound (F16 weights, other summation orders through 27
// layers). Measured (x86-64, release): 1.1e-5 (t2i) and 1.7e-5 (edit) absolute.
constexpr double kTextTolerance = 1e-4;
// Sigmas: diffusers' scheduler shifts numpy float64 sigmas, ComfyUI's (flux2Sigmas) float32 ones.
constexpr double kSigmaTolerance = 1e-6;
// A reference's latent: the VAE encoder's f32 error (flux2_vae_test.cpp). Measured: 1.6e-6.
constexpr double kReferenceTolerance = 1e-5;
// A step's latent from the reference's rows: the DiT's error (klein_dit_test.cpp) over 4 steps,
// and diffusers' Euler step x + (sigma' - sigma) v against ComfyUI's by denoised. Measured: 8.6e-6
// (t2i) and 4.4e-6 (edit) after the last step, of latents up to 5.8.
constexpr double kLatentTolerance = 5e-5;
// The VAE's pixels from the reference's last latent. Measured: 1.5e-6 and 1.7e-6.
constexpr double kDecodedTolerance = 1e-5;

// The reference's picture bytes (U8 [H, W, 3]); test::pixelsWithinOne compares them: measured,
// every pixel within 1/255, both runs, staged and painted end to end.
std::vector<uint8_t> bytes(const T::Tensor& t) {
  const std::vector<float> v = t.toFloats();
  return {v.begin(), v.end()};
}

// The run's stages (t2i or edit) from the reference's rows and references; the largest errors.
void expectStages(const std::string& run, const std::string& prompt, const std::vector<image::Image>& pictures,
                  int64_t width, int64_t height) {
  const diffusion::KleinPipeline& p = pipeline();
  const auto& f = fixture();
  const diffusion::KleinConditioning mine = p.condition(prompt, pictures);
  const double textError = test::maxAbsDiff(mine.text, f.at(run + "_text"));
  EXPECT_LE(textError, kTextTolerance) << run;
  diffusion::KleinConditioning theirs{f.at(run + "_text"), {}};
  double referenceError = 0;
  ASSERT_EQ(mine.references.size(), pictures.size());
  if (!pictures.empty()) {
    referenceError = test::maxAbsDiff(mine.references[0], f.at("edit_ref0"));
    EXPECT_LE(referenceError, kReferenceTolerance);
    theirs.references = {f.at("edit_ref0")};
  }
  const int64_t h = height / 4, w = width / 4;
  const std::vector<float> sigmas = diffusion::flux2Sigmas(4, h * w), want = f.at(run + "_sigmas").toFloats();
  ASSERT_EQ(sigmas.size(), want.size());
  for (size_t i = 0; i < sigmas.size(); ++i) EXPECT_NEAR(sigmas[i], want[i], kSigmaTolerance) << run << " " << i;
  EXPECT_EQ(diffusion::torchRandn(42, {1, 128, h, w}).toFloats(), f.at(run + "_noise").toFloats());
  std::vector<double> stepErrors;
  const T::Tensor latent = p.sample(theirs, 42, width, height, [&](const diffusion::ZImageStep& s) {
    EXPECT_EQ(s.step, static_cast<int64_t>(stepErrors.size()));
    EXPECT_EQ(s.steps, 4);
    EXPECT_EQ(s.sigma, sigmas[static_cast<size_t>(s.step)]);
    stepErrors.push_back(test::maxAbsDiff(s.latent, f.at(run + "_step" + std::to_string(s.step))));
  });
  ASSERT_EQ(stepErrors.size(), 4u);
  for (size_t i = 0; i < stepErrors.size(); ++i) EXPECT_LE(stepErrors[i], kLatentTolerance) << run << " step " << i;
  EXPECT_EQ(latent.shape(), (T::Shape{1, 128, h, w}));
  const T::Tensor& last = f.at(run + "_step3");
  const double decodedError =
      test::maxAbsDiff(diffusion::Flux2Vae::load(data("flux2_vae_tiny.safetensors")).decode(last), f.at(run + "_decoded"));
  EXPECT_LE(decodedError, kDecodedTolerance) << run;
  const int64_t close = test::pixelsWithinOne(p.decode(last), bytes(f.at(run + "_image")));
  std::printf("%s: text %.2e, reference %.2e, last step %.2e, decoded %.2e; pixels within 1/255: %lld of %lld\n",
              run.c_str(), textError, referenceError, stepErrors.back(), decodedError, static_cast<long long>(close),
              static_cast<long long>(width * height));
  EXPECT_EQ(close, width * height) << run;
}

}  // namespace

TEST(KleinPipeline, TextToImageStagesAsTheReference) {
  EXPECT_EQ(pipeline().sizeMultiple(), 4);
  EXPECT_EQ(pipeline().config().steps, 4);
  expectStages("t2i", kTextPrompt, {}, 48, 32);
}

TEST(KleinPipeline, EditStagesAsTheReference) {
  // diffusers crops 70 x 66 to the multiples of 4 around its center, nothing scaled.
  const image::Image ref = pipeline().referencePicture(picture());
  ASSERT_EQ(ref.width, 68);
  ASSERT_EQ(ref.height, 64);
  const image::Image whole = picture();
  for (int64_t y = 0; y < 64; ++y)
    for (int64_t x = 0; x < 68 * 3; ++x)
      ASSERT_EQ(ref.pixels[y * 68 * 3 + x], whole.pixels[(y + 1) * 70 * 3 + 3 + x]);
  expectStages("edit", kEditPrompt, {picture()}, 40, 36);
}

TEST(KleinPipeline, PaintsTheReferencePictures) {
  const image::Image t2i = pipeline().paint(kTextPrompt, 42, {}, 48, 32);
  const image::Image edit = pipeline().paint(kEditPrompt, 42, {picture()}, 40, 36);
  const int64_t t2iClose = test::pixelsWithinOne(t2i, bytes(fixture().at("t2i_image")));
  const int64_t editClose = test::pixelsWithinOne(edit, bytes(fixture().at("edit_image")));
  std::printf("paint: pixels within 1/255: t2i %lld of 1536, edit %lld of 1440\n", static_cast<long long>(t2iClose),
              static_cast<long long>(editClose));
  EXPECT_EQ(t2iClose, 48 * 32);
  EXPECT_EQ(editClose, 40 * 36);
}

// Two pictures (the edit's and a 72 x 64 one, its tokens at t = 20): the last latent and the
// picture end to end against diffusers' run of the same prompt, noise and size.
TEST(KleinPipeline, EditOfTwoPicturesAsTheReference) {
  const std::vector<image::Image> pictures = {picture(), picture("edits_picture1")};
  const diffusion::KleinConditioning c = pipeline().condition(kEditPrompt, pictures);
  ASSERT_EQ(c.references.size(), 2u);
  EXPECT_EQ(c.references[1].shape(), (T::Shape{1, 128, 16, 18}));
  const T::Tensor latent = pipeline().sample(c, 42, 40, 36);
  const double error = test::maxAbsDiff(latent, fixture().at("edits_step3"));
  const int64_t close = test::pixelsWithinOne(pipeline().decode(latent), bytes(fixture().at("edits_image")));
  std::printf("two pictures: last step %.2e; pixels within 1/255: %lld of 1440\n", error,
              static_cast<long long>(close));
  EXPECT_LE(error, kLatentTolerance);
  EXPECT_EQ(close, 40 * 36);
  // The second picture matters: the one-picture run's last latent is 0.10 away (measured).
  EXPECT_GT(test::maxAbsDiff(fixture().at("edit_step3"), fixture().at("edits_step3")), 1e-2);
}

TEST(KleinPipeline, EditSizeKeepsTheFirstPicturesAspect) {
  // About 1 MP: 70 x 66 scaled by sqrt(2^20 / 4620) to 1054 x 994, floored to multiples of 4.
  EXPECT_EQ(pipeline().editSize(picture()), (std::pair<int64_t, int64_t>{1052, 992}));
  // At the picture's own area it is diffusers' default for a picture under 1 MP: its crop's size.
  diffusion::KleinPipelineConfig config;
  config.editArea = 70 * 66;
  const auto small = loaded(config);
  EXPECT_EQ(small.editSize(picture()), (std::pair<int64_t, int64_t>{68, 64}));
  // Above 1 MP a reference is scaled to it first (4000 x 3000: 1182 x 886, cropped to 1180 x 884).
  const image::Image big{4000, 3000, std::vector<uint8_t>(4000 * 3000 * 3, 7)};
  const image::Image scaled = pipeline().referencePicture(big);
  EXPECT_EQ(scaled.width, 1180);
  EXPECT_EQ(scaled.height, 884);
}

TEST(KleinPipeline, RefusesWhatDoesNotFit) {
  const std::string other = data("klein2_tiny_bfl.safetensors");  // text 32 wide, latents of 4 channels
  expectError([&] { diffusion::KleinPipeline::load(other, data("flux2_vae_tiny.safetensors"), textFolder()); },
              {textFolder(), other, "48", "32"});
  expectError([&] { pipeline().paint(kTextPrompt, 42, {}, 42, 32); }, {"42 x 32", "multiples of 4"});
  expectError([&] { pipeline().paint(kTextPrompt, 42); }, {"no size"});
  expectError([&] { pipeline().referencePicture({3, 3, std::vector<uint8_t>(27)}); }, {"3 x 3", "smaller than 4"});
  expectError([&] { pipeline().sample({T::zeros({512, 32}, DType::F32), {}}, 42, 48, 32); }, {"[512, 32]", "48"});
  diffusion::KleinPipelineConfig bad;
  bad.cache = -0.5;
  expectError([&] { loaded(bad); }, {"cache", "-0.5", "negative or NaN"});
  bad.cache = std::nan("");
  expectError([&] { loaded(bad); }, {"cache", "nan"});
  bad = {};
  bad.steps = -1;
  expectError([&] { loaded(bad); }, {"steps -1", "negative"});
}

// The step cache on the tiny text to image (48 x 32, seed 42) against the run without it. The
// tiny DiT's weights are random: what its first block adds to the image rows changes by 85% to
// 190% of itself a step (KleinStepCache's tests print it), so the default 0.3 skips nothing and
// the latent is the uncached one bit for bit; threshold 1 at 16 steps skips 5 (measured, x86-64
// release), the picture at 48.8 dB PSNR of the uncached one. The bound, 45 dB, fails a cache
// that subtracts the cached residual (42.9 dB measured) but not one that adds none (48.1 dB):
// that what is added is the residual is KleinStepCache.SkippedStepsAddTheLastResidual's test.
TEST(KleinPipeline, StepCacheOnTheTinyModel) {
  EXPECT_EQ(diffusion::KleinPipelineConfig{}.cache, 0.3);
  const diffusion::KleinConditioning c = pipeline().condition(kTextPrompt);
  diffusion::KleinPipelineConfig config;
  int64_t skipped = 0;
  const auto count = [&](const diffusion::ZImageStep& s) { skipped += s.cached; };
  EXPECT_EQ(loaded(config).sample(c, 42, 48, 32, count).toFloats(), pipeline().sample(c, 42, 48, 32).toFloats());
  EXPECT_EQ(skipped, 0);

  config.steps = 16;
  config.cache = 0;
  const diffusion::KleinPipeline off = loaded(config);
  config.cache = 1.0;
  const diffusion::KleinPipeline on = loaded(config);
  skipped = 0;
  const double psnr = test::psnr(on.decode(on.sample(c, 42, 48, 32, count)), off.decode(off.sample(c, 42, 48, 32)));
  std::printf("step cache 1 over 16 steps: %lld skipped, PSNR %.2f dB against no cache\n",
              static_cast<long long>(skipped), psnr);
  EXPECT_GE(skipped, 1);
  EXPECT_GT(psnr, 45.0);
  EXPECT_LT(psnr, 100.0);  // the skipped steps changed the picture
}

// Refresh 2 on the tiny edit (40 x 36, 16 steps, no step cache): the reference runs through the
// blocks at 8 of the 16 steps, the others read its keys. The picture against every step's:
// measured 54.2 dB (x86-64, release); it must change, and stay near (40 dB: a loose floor, the
// keys' use is KleinStepCache's Refresh tests').
TEST(KleinPipeline, RefreshOnTheTinyEdit) {
  EXPECT_EQ(diffusion::KleinPipelineConfig{}.refresh, 0);
  const diffusion::KleinConditioning c = pipeline().condition(kEditPrompt, {picture()});
  diffusion::KleinPipelineConfig config;
  config.steps = 16;
  config.cache = 0;
  const diffusion::KleinPipeline every = loaded(config);
  config.refresh = 2;
  const diffusion::KleinPipeline second = loaded(config);
  const double psnr =
      test::psnr(second.decode(second.sample(c, 42, 40, 36)), every.decode(every.sample(c, 42, 40, 36)));
  std::printf("refresh 2 over 16 steps: PSNR %.2f dB against every step\n", psnr);
  EXPECT_GT(psnr, 40.0);
  EXPECT_LT(psnr, 100.0);
  config.refresh = -1;
  expectError([&] { loaded(config); }, {"refresh", "-1", "negative"});
}

// The tiny model as giz paint's MODEL folder (klein_tiny.h; docs/serve.md, "Images") under
// $GIZML_KLEIN_FOLDER, for the command-line tests of tests/CMakeLists.txt: model/ with the DiT,
// the VAE and the converted text encoder, picture.png, the fixture's 70 x 66 reference, and
// upsampler/, the prompt upsampler's tiny model (upsampler_tiny.h).
// Skipped when the variable is unset.
TEST(KleinTinyFolder, Write) {
  const std::optional<fs::path> made = test::freshModelFolder("GIZML_KLEIN_FOLDER");
  if (!made) GTEST_SKIP() << "GIZML_KLEIN_FOLDER is not set";
  const fs::path& folder = *made;
  fs::create_directories(folder / "model" / "text_encoders");
  fs::copy_file(test::klein::ditPath(), folder / "model" / "diffusion_models" / "klein_tiny.safetensors");
  fs::copy_file(test::klein::vaePath(), folder / "model" / "vae" / "flux2-vae.safetensors");
  fs::copy(textFolder(), folder / "model" / "text_encoders" / "qwen3_tiny", fs::copy_options::recursive);
  fs::copy(test::upsampler::modelFolder(), folder / "upsampler", fs::copy_options::recursive);
  test::upsampler::writeVisionHf(folder / "vl_hf");  // giz convert's and giz run --picture's
  const std::vector<uint8_t> png = image::encodePng(picture());
  std::ofstream(folder / "picture.png", std::ios::binary)
      .write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
}

// giz run --picture's answer ($GIZML_KLEIN_FOLDER/run_answer.txt: tests/CMakeLists.txt converts
// vl_hf with giz convert and asks it about a picture with --system, greedy, 12 tokens) against
// transformers' on the same chat (tests/reference/make_upsampler_vision_fixtures.py's run).
TEST(KleinTinyFolder, GizRanThePicture) {
  const char* root = std::getenv("GIZML_KLEIN_FOLDER");
  if (!root) GTEST_SKIP() << "GIZML_KLEIN_FOLDER is not set";
  std::ifstream in(fs::path(root) / "run_answer.txt");
  ASSERT_TRUE(in);
  std::string answer((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!answer.empty() && std::isspace(static_cast<unsigned char>(answer.back()))) answer.pop_back();
  const nlohmann::json run = nlohmann::json::parse(std::ifstream(test::zimage::data("upsampler_vl_run.json")));
  EXPECT_EQ(answer, run["answer"].get<std::string>());
}

// giz paint's pictures from the folder above (tests/CMakeLists.txt: $GIZML_KLEIN_FOLDER/t2i.png,
// the text to image at 48 x 32 with the default step cache, and edit.png, picture.png edited at
// 40 x 36 with --cache 0 --refresh 2 --steps 6 and "A lighthouse at night", both seed 42; and
// upsampled.png, the text to image with --upsample upsampler/, its prompt the Upsampler's caption
// sampled with seed 42; layout.png, with --layout klein_layout.json, its prompt fluxLayout's)
// against KleinPipeline::paint's, byte for byte.
TEST(KleinTinyFolder, GizPaintedAsThePipeline) {
  const char* root = std::getenv("GIZML_KLEIN_FOLDER");
  if (!root) GTEST_SKIP() << "GIZML_KLEIN_FOLDER is not set";
  const auto read = [](const fs::path& path) {
    std::ifstream file(path, std::ios::binary);
    EXPECT_TRUE(file) << path;
    return image::decode(std::vector<uint8_t>((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>()));
  };
  const image::Image t2i = read(fs::path(root) / "t2i.png"), edit = read(fs::path(root) / "edit.png"),
                    upsampled = read(fs::path(root) / "upsampled.png"), laidOut = read(fs::path(root) / "layout.png");
  const image::Image wantT2i = loaded({}).paint(kTextPrompt, 42, {}, 48, 32);
  diffusion::KleinPipelineConfig editConfig;
  editConfig.cache = 0;
  editConfig.refresh = 2;
  editConfig.steps = 6;
  const image::Image wantEdit = loaded(editConfig).paint("A lighthouse at night", 42, {picture()}, 40, 36);
  EXPECT_EQ(t2i.width, 48);
  EXPECT_EQ(t2i.height, 32);
  EXPECT_EQ(t2i.pixels, wantT2i.pixels);
  EXPECT_EQ(edit.width, 40);
  EXPECT_EQ(edit.height, 36);
  EXPECT_EQ(edit.pixels, wantEdit.pixels);
  const std::string prompt =
      diffusion::Upsampler::load((fs::path(root) / "upsampler").string(), {.seed = 42}).caption(kTextPrompt);
  EXPECT_NE(prompt, kTextPrompt);
  EXPECT_EQ(upsampled.pixels, loaded({}).paint(prompt, 42, {}, 48, 32).pixels);
  std::ifstream layoutFile(test::diffusionData("klein_layout.json"));
  const std::string layout = diffusion::fluxLayout(
      kTextPrompt, diffusion::fluxElements(nlohmann::ordered_json::parse(layoutFile)));
  EXPECT_NE(layout.find("<fox_1> <tree_1> [{"), std::string::npos) << layout;
  EXPECT_EQ(laidOut.pixels, loaded({}).paint(layout, 42, {}, 48, 32).pixels);
}
