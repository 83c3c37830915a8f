// gizml::diffusion::H3Text and H3Pipeline against diffusers' whole MiniMax H3 modular pipeline on
// tiny random parts (tests/reference/make_h3_pipeline_fixtures.py): a 51-layer Qwen3-VL text
// encoder over Qwen3's real tokenizer, a 2-block transformer, the tiny video and audio decoders of
// make_h3_decoder_fixtures.py; a t2va request of 120 frames (rounded up to 124), 16 x 8 pixels,
// seed 42, 2 Euler passes. Each stage and the end result, the noise bit for bit; the layout's
// rounding and its mistakes. Also the model folder giz video reads (tests/CMakeLists.txt).
#include <gizhw/gpu.h>
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gizml/safetensors.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "diffusion/weight_fixture.h"
#include "diffusion/zimage_tiny.h"

using namespace gizml;
namespace fs = std::filesystem;
using test::maxAbsDiff;

namespace {

const std::string kPrompt = "A lighthouse at dusk, waves on the rocks; «stürmisch», 35 mm";

const test::Weights& reference() {
  static const test::Weights c = llm::loadSafetensors(test::diffusionData("h3_pipeline_case.safetensors"));
  return c;
}
const T::Tensor& at(const std::string& name) { return reference().at(name); }

// A fixture's I64 tensor (small whole numbers: exact through float).
std::vector<int64_t> ints(const std::string& name) {
  const std::vector<float> v = at(name).toFloats();
  return {v.begin(), v.end()};
}

// convertTextEncoder's folder of the tiny Qwen3-VL (hidden state 50), made once a process.
const std::string& textFolder() {
  static const std::string folder = [] {
    const std::string hf = test::temporary("h3_text_hf"), out = test::temporary("h3_text");
    test::zimage::writeTextHf(hf, {}, "h3_text_tiny");
    fs::remove_all(out);
    diffusion::convertTextEncoder(hf, out, {diffusion::kH3TextLayer});
    return out;
  }();
  return folder;
}

// The tiny decoders' geometry (make_h3_decoder_fixtures.py's VIDEO, TILE and TILE_OVERLAP) and
// latent statistics; 2 passes.
diffusion::H3PipelineConfig config() {
  static const test::Weights video = llm::loadSafetensors(test::diffusionData("h3_video_tiny_case.safetensors"));
  static const test::Weights audio = llm::loadSafetensors(test::diffusionData("h3_audio_tiny_case.safetensors"));
  diffusion::H3PipelineConfig c;
  c.steps = 2;
  c.video.headDim = 32;
  c.video.patch = 4;
  c.video.patchT = 4;
  c.video.tile = 8;
  c.video.tileOverlap = 4;
  c.video.latentsMean = video.at("latents_mean").toFloats();
  c.video.latentsStd = video.at("latents_std").toFloats();
  c.audio.latentsMean = audio.at("latents_mean").toFloats();
  c.audio.latentsStd = audio.at("latents_std").toFloats();
  return c;
}

const diffusion::H3Pipeline& pipeline() {
  static const diffusion::H3Pipeline p = diffusion::H3Pipeline::load(
      test::diffusionData("h3_pipe_tiny.safetensors"), test::diffusionData("h3_video_tiny.safetensors"),
      test::diffusionData("h3_audio_tiny.safetensors"), textFolder(), config());
  return p;
}

// The reference's audio noise [2, 207, 32] and latents [2, 32, 207]: H3Latents' audio is
// [streams, latents, channels].
T::Tensor audioRows(const T::Tensor& channelsFirst) { return channelsFirst.permute({0, 2, 1}).contiguous(); }

// The text states reach 23, latents 6, pixels and samples 1; torch sums in other orders. Measured
// (x86-64, release build, Zen 5): text 1.5e-5, latents 9.5e-7, frames 2.4e-7, sound 3.0e-7.
constexpr double kTextTolerance = 1e-4, kTolerance = 2e-5;

TEST(H3Text, StatesAsDiffusers) {
  const diffusion::H3Text text = diffusion::H3Text::load(textFolder());
  const std::vector<int64_t> want = ints("tokens");
  const std::vector<llm::TokenId> got = text.promptTokens(kPrompt);
  EXPECT_EQ(std::vector<int64_t>(got.begin(), got.end()), want);
  const diffusion::H3Condition c = text.condition(kPrompt);
  EXPECT_TRUE(c.textTags.empty());
  EXPECT_TRUE(c.keyframes.empty());
  ASSERT_EQ(c.text.shape(), at("text").shape());
  EXPECT_LT(maxAbsDiff(c.text, at("text")), kTextTolerance);
  EXPECT_THROW(text.condition(""), Error);
  EXPECT_THROW(diffusion::H3Text::load(textFolder(), 51), Error);  // the folder holds 50 layers
  EXPECT_THROW(diffusion::H3Text::load(textFolder(), 0), Error);
}

TEST(H3Pipeline, LayoutAsDiffusers) {
  const diffusion::H3Layout l = pipeline().layout(120, 16, 8);
  EXPECT_EQ(l.frames, ints("num_frames")[0]);
  EXPECT_EQ(l.frames, 124);
  EXPECT_EQ(std::vector<int64_t>({l.height, l.width}), ints("size"));
  EXPECT_EQ(l.latentFrames, 37);
  EXPECT_EQ(l.latentHeight, 2);
  EXPECT_EQ(l.latentWidth, 4);
  EXPECT_EQ(l.audioLatents, 207);
  EXPECT_EQ(pipeline().sizeMultiple(), 8);
  EXPECT_EQ(pipeline().layout(124, 16, 8).frames, 124);
  // diffusers' resolve_canvas_size(16, 9, 8, 768, 768 * 1344) gives (height, width) (760, 1352); at
  // the released decoder's multiple of 32, (768, 1344).
  EXPECT_EQ(pipeline().defaultSize(), (std::pair<int64_t, int64_t>{1352, 760}));
  EXPECT_EQ(diffusion::H3Pipeline::defaultSize(diffusion::H3PipelineConfig{}), (std::pair<int64_t, int64_t>{1344, 768}));
  // The released model's frame counts: 108 to 345 (108 rounds up to 124, 5.17 s; 345 is 17 20 + 5).
  const diffusion::H3PipelineConfig released;
  EXPECT_EQ(diffusion::H3Pipeline::layout(released, 108).frames, 124);
  EXPECT_EQ(diffusion::H3Pipeline::layout(released, 345).frames, 345);
  EXPECT_THROW(diffusion::H3Pipeline::layout(released, 107), Error);  // 107 stays 107: 4.46 s
  EXPECT_THROW(diffusion::H3Pipeline::layout(released, 346), Error);  // up to 362: 15.08 s
  const diffusion::H3Layout canvas = diffusion::H3Pipeline::layout(released, 124);
  EXPECT_EQ(std::vector<int64_t>({canvas.width, canvas.height, canvas.latentWidth, canvas.latentHeight}),
            std::vector<int64_t>({1344, 768, 84, 48}));
  EXPECT_THROW(diffusion::H3Pipeline::layout(released, 124, 65536 + 32 - 65536 % 32, 32), Error);  // a side over kMaxSide
  diffusion::H3PipelineConfig oneFramePatch = released;
  oneFramePatch.video.patchT = 1;  // a clip would keep all its frames: no layout, not an endless search
  EXPECT_THROW(diffusion::H3Pipeline::layout(oneFramePatch, 124), Error);
  diffusion::H3PipelineConfig manySteps = released;
  manySteps.steps = 1001;
  EXPECT_THROW(diffusion::H3Pipeline::layout(manySteps, 124), Error);
  EXPECT_THROW(pipeline().layout(100, 16, 8), Error);  // 107 frames: 4.46 s, under 5
  EXPECT_THROW(pipeline().layout(400, 16, 8), Error);  // 413 frames: 17.2 s, over 15
  EXPECT_THROW(pipeline().layout(0, 16, 8), Error);
  EXPECT_THROW(pipeline().layout(124, 12, 8), Error);  // not a multiple of 8
  EXPECT_THROW(pipeline().layout(124, 16, 0), Error);
}

TEST(H3Pipeline, NoiseIsTheGeneratorsBitForBit) {
  const diffusion::H3Latents n = pipeline().noise(42, pipeline().layout(120, 16, 8));
  const T::Tensor& video = at("noise_video");
  EXPECT_EQ(n.video.toFloats(), video.toFloats());
  EXPECT_EQ(n.video.shape(), (T::Shape{video.size(1), video.size(2), video.size(3), video.size(4)}));
  EXPECT_EQ(n.audio.shape(), at("noise_audio").shape());
  EXPECT_EQ(n.audio.toFloats(), at("noise_audio").toFloats());
}

TEST(H3Pipeline, SampleAndDecodeAsDiffusers) {
  const diffusion::H3Latents noise = pipeline().noise(42, pipeline().layout(120, 16, 8));
  int64_t passes = 0;
  const diffusion::H3Latents x = pipeline().sample(noise, pipeline().condition(kPrompt),
                                                   [&](int64_t step, const diffusion::H3Latents&) {
                                                     EXPECT_EQ(step, passes++);
                                                   });
  EXPECT_EQ(passes, 2);
  EXPECT_LT(maxAbsDiff(x.video.reshape(at("latents_video").shape()), at("latents_video")), kTolerance);
  EXPECT_LT(maxAbsDiff(x.audio, audioRows(at("latents_audio"))), kTolerance);

  // The decoders on the reference's own latents: the frames and the sound.
  diffusion::H3Latents reference;
  const T::Shape& v = at("latents_video").shape();
  reference.video = at("latents_video").reshape({v[1], v[2], v[3], v[4]});
  reference.audio = audioRows(at("latents_audio"));
  diffusion::H3Times times;
  const diffusion::H3Video out = pipeline().decode(reference, &times);
  ASSERT_EQ(out.frames.shape(), at("frames").shape());
  EXPECT_LT(maxAbsDiff(out.frames, at("frames")), kTolerance);
  ASSERT_EQ(out.sound.shape(), at("audio").shape());
  EXPECT_LT(maxAbsDiff(out.sound, at("audio")), kTolerance);
  EXPECT_EQ(out.fps, 24);
  EXPECT_EQ(out.sampleRate, 32000);
  EXPECT_GT(times.video, 0);
  EXPECT_GT(times.audio, 0);
}

TEST(H3Pipeline, GenerateIsItsStages) {
  const diffusion::H3Layout layout = pipeline().layout(120, 16, 8);
  diffusion::H3Times times;
  int64_t passes = 0;
  const diffusion::H3Video whole =
      pipeline().generate(kPrompt, 42, layout, [&](int64_t, const diffusion::H3Latents&) { ++passes; }, &times);
  EXPECT_EQ(passes, 2);
  const diffusion::H3Video staged =
      pipeline().decode(pipeline().sample(pipeline().noise(42, layout), pipeline().condition(kPrompt)));
  EXPECT_EQ(whole.frames.toFloats(), staged.frames.toFloats());
  EXPECT_EQ(whole.sound.toFloats(), staged.sound.toFloats());
  EXPECT_LT(maxAbsDiff(whole.frames, at("frames")), kTolerance);
  EXPECT_GT(times.text, 0);
  EXPECT_GT(times.sample, 0);
}

TEST(H3Pipeline, MismatchedPartsNamed) {
  // make_h3_fixtures.py's transformer makes 4 video channels; the tiny video decoder reads 24.
  const std::string model = test::diffusionData("h3_pipe_tiny.safetensors");
  try {
    diffusion::H3Pipeline::load(test::diffusionData("h3_tiny.safetensors"), test::diffusionData("h3_video_tiny.safetensors"),
                                test::diffusionData("h3_audio_tiny.safetensors"), textFolder(), config());
    ADD_FAILURE() << "a transformer of 4 video channels loaded with a 24-channel decoder";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("h3_video_tiny.safetensors: decodes 24 latent channels"), std::string::npos)
        << e.what();
  }
  try {  // the tiny Z-Image text encoder's states are 32 wide; the transformer reads 24
    diffusion::H3Pipeline::load(model, test::diffusionData("h3_video_tiny.safetensors"),
                                test::diffusionData("h3_audio_tiny.safetensors"), test::zimage::textFolder(), [] {
                                  diffusion::H3PipelineConfig c = config();
                                  c.textLayer = 2;
                                  return c;
                                }());
    ADD_FAILURE() << "a text encoder of another width loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the text encoder's states are"), std::string::npos) << e.what();
  }
  diffusion::H3PipelineConfig bad = config();
  bad.fps = 0;
  EXPECT_THROW(diffusion::H3Pipeline::load(model, test::diffusionData("h3_video_tiny.safetensors"),
                                           test::diffusionData("h3_audio_tiny.safetensors"), textFolder(), bad),
               Error);
}

// giz video's MODEL folder (tests/CMakeLists.txt: $GIZML_H3_FOLDER/model): the tiny parts laid out
// as giz video finds them and h3.json with the tiny decoders' geometry and statistics; the text
// encoder as a Hugging Face folder ($GIZML_H3_FOLDER/text_hf) for giz convert --h3-text to convert
// into model/text_encoders/.
TEST(H3TinyFolder, Write) {
  const std::optional<fs::path> made = test::freshModelFolder("GIZML_H3_FOLDER");
  if (!made) GTEST_SKIP() << "GIZML_H3_FOLDER is not set";
  const fs::path model = *made / "model";
  fs::create_directories(model / "text_encoders");
  fs::create_directories(model / "audio_vae");
  fs::copy_file(test::diffusionData("h3_pipe_tiny.safetensors"), model / "diffusion_models" / "h3_tiny.safetensors");
  fs::copy_file(test::diffusionData("h3_video_tiny.safetensors"), model / "vae" / "video_vae.safetensors");
  fs::copy_file(test::diffusionData("h3_audio_tiny.safetensors"), model / "audio_vae" / "audio_vae.safetensors");
  test::zimage::writeTextHf(*made / "text_hf", {}, "h3_text_tiny");
  const diffusion::H3PipelineConfig c = config();
  const nlohmann::json h3 = {
      {"video",
       {{"head_dim", c.video.headDim}, {"patch", c.video.patch}, {"patch_t", c.video.patchT}, {"tile", c.video.tile},
        {"tile_overlap", c.video.tileOverlap}, {"latents_mean", c.video.latentsMean},
        {"latents_std", c.video.latentsStd}}},
      {"audio", {{"latents_mean", c.audio.latentsMean}, {"latents_std", c.audio.latentsStd}}}};
  std::ofstream(model / "h3.json") << h3.dump(2);
}

}  // namespace

// The pipeline with its transformer on a GPU (the emulator in ctest's emulator_test_diffusion): the
// fixture's request against diffusers' frames and sound, as on the host. Skipped without a GPU.
TEST(H3PipelineGpu, GeneratesAsDiffusers) {
  const auto gpu = gizhw::gpu::open();
  if (!gpu) GTEST_SKIP() << "no GPU found: GPU test skipped";
  diffusion::H3PipelineConfig c = config();
  c.gpu = *gpu;
  const diffusion::H3Pipeline p = diffusion::H3Pipeline::load(
      test::diffusionData("h3_pipe_tiny.safetensors"), test::diffusionData("h3_video_tiny.safetensors"),
      test::diffusionData("h3_audio_tiny.safetensors"), textFolder(), c);
  const diffusion::H3Layout layout = p.layout(120, 16, 8);
  EXPECT_TRUE(p.noise(42, layout).video.onGpu());
  const diffusion::H3Video out = p.generate(kPrompt, 42, layout);
  const double frames = maxAbsDiff(out.frames, at("frames")), sound = maxAbsDiff(out.sound, at("audio"));
  std::printf("H3 pipeline, transformer on %s: frames %.3g, sound %.3g from diffusers\n", gpu->describe().c_str(),
              frames, sound);
  EXPECT_LT(frames, kTolerance);
  EXPECT_LT(sound, kTolerance);
}
