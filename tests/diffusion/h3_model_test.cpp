// gizml::diffusion::H3Model against tests/reference/make_h3_fixtures.py: a tiny MiniMax H3
// transformer (hidden 48, 2 heads of 32, rope_freq_dim 4, 2 blocks, 1 refiner block; the
// checkpoint's names, BF16 and F32 as released) run by diffusers' MiniMaxH3Transformer3DModel in
// float32 over a t2va layout with a first-frame keyframe (7 text tokens, 6 keyframe, 10 audio and
// 18 video rows): the first block, one pass, the AdaLN rows of a 2-pass schedule and a 2-pass
// sample. Bad files and inputs: a gizml::Error naming the file and the tensor, or the input.
#include <gizhw/gpu.h>
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gizml/safetensors.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "diffusion/h3_model.h"
#include "diffusion/weight_fixture.h"

using namespace gizml;

namespace {

// Values are within about [-4, 4]. torch sums its matmuls, norms and attention in other orders
// and its exp, sin and cos differ from libm's in the last bit. Measured (x86-64, release build):
// the first block 4.8e-7, a pass 8.3e-7, the 2-pass sample 7.2e-7.
constexpr double kTolerance = 1e-5;

using test::maxAbsDiff;

const std::map<std::string, T::Tensor>& fixture() {
  static const std::map<std::string, T::Tensor> c =
      llm::loadSafetensors(test::diffusionData("h3_tiny_case.safetensors"));
  return c;
}

const T::Tensor& at(const std::string& name) { return fixture().at(name); }

diffusion::H3Model tiny() { return diffusion::H3Model::load(test::diffusionData("h3_tiny.safetensors")); }

diffusion::H3Condition condition() {
  diffusion::H3Condition c;
  c.text = at("text");
  for (float t : at("text_tags").cast(DType::F32).toFloats()) c.textTags.push_back(static_cast<int>(t));
  c.keyframes.push_back({at("keyframe"), false});
  return c;
}

// x's video and audio are the fixture's, within kTolerance.
void expectNear(const diffusion::H3Latents& x, const std::string& video, const std::string& audio,
                const std::string& what) {
  ASSERT_EQ(x.video.shape(), at(video).shape());
  ASSERT_EQ(x.audio.shape(), at(audio).shape());
  const double dv = maxAbsDiff(x.video, at(video)), da = maxAbsDiff(x.audio, at(audio));
  EXPECT_LT(dv, kTolerance);
  EXPECT_LT(da, kTolerance);
  std::printf("%s: max |ours - diffusers| video %.3g, audio %.3g\n", what.c_str(), dv, da);
}

void expectLoadError(const std::string& name, const std::function<void(test::Weights&)>& edit,
                     const std::string& tensorName) {
  const std::string path = test::editedWeights("h3_tiny.safetensors", "h3_" + name, edit);
  test::expectLoadError([](const std::string& p) { diffusion::H3Model::load(p); }, path, tensorName);
}

}  // namespace

TEST(H3Model, LoadsTheCheckpointsSizes) {
  const diffusion::H3Model m = tiny();
  EXPECT_EQ(m.hidden(), 48);
  EXPECT_EQ(m.blocks(), 2);
  EXPECT_EQ(m.videoChannels(), 4);
  EXPECT_EQ(m.audioChannels(), 6);
  EXPECT_EQ(m.textDim(), 24);
  EXPECT_EQ(m.tableBytes(), 0);
  EXPECT_TRUE(m.videoSigmas().empty());
}

TEST(H3Model, FirstBlockAsDiffusers) {
  const diffusion::H3Model m = tiny();
  const auto& w = *diffusion::H3Model::Weights::of(m);
  std::vector<double> ts;
  for (float t : at("block_timesteps").toFloats()) ts.push_back(t);
  const diffusion::h3::Mods mods = diffusion::h3::modulations(w, ts);
  const diffusion::h3::Layout layout = diffusion::h3::layoutOf(condition(), 3, 4, 6, 5);
  ASSERT_EQ(layout.rows, 41);
  const T::Tensor out = diffusion::h3::block(w, w.blocks[0], at("block_in"), mods.blocks[0],
                                             at("block_rows").cast(DType::I64), diffusion::h3::ropeOf(w, layout));
  const double d = maxAbsDiff(out, at("block_out"));
  EXPECT_LT(d, kTolerance);
  std::printf("first block: max |ours - diffusers| %.3g\n", d);
}

TEST(H3Model, ForwardAsDiffusers) {
  const diffusion::H3Model m = tiny();
  const diffusion::H3Latents v = m.forward({at("video"), at("audio")}, at("t_video").item(), at("t_audio").item(),
                                           condition());
  expectNear(v, "video_out", "audio_out", "one pass");
}

TEST(H3Model, PreparedTablesAndSampleAsDiffusers) {
  diffusion::H3Model m = tiny();
  EXPECT_THROW(m.sample({at("video"), at("audio")}, condition()), Error);
  const int64_t bytes = m.prepare(2);
  // 2 passes x 3 timesteps (video, audio, keyframe) x (2 blocks x 3 modalities x 6 + 2) x 48 floats.
  EXPECT_EQ(bytes, 2 * 3 * (2 * 3 * 6 + 2) * 48 * 4);
  EXPECT_EQ(m.tableBytes(), bytes);
  EXPECT_EQ(m.videoSigmas(), at("sigmas_video").toFloats());
  EXPECT_EQ(m.audioSigmas(), at("sigmas_audio").toFloats());

  // Step 0's rows, as diffusers' adaln_proj and norm_out.linear give them (its 4th timestep, 1.0,
  // is an audio reference's, which this layout has not).
  const auto& w = *diffusion::H3Model::Weights::of(m);
  const diffusion::h3::Mods& step0 = diffusion::H3Model::Tables::of(m)->steps[0];
  const T::Tensor block1 = T::concat({step0.blocks[1][0], step0.blocks[1][1], step0.blocks[1][2], step0.blocks[1][3],
                                      step0.blocks[1][4], step0.blocks[1][5]},
                                     1);
  EXPECT_LT(maxAbsDiff(block1, at("mods_step0_block1").slice(0, 0, 9)), kTolerance);
  const T::Tensor final0 = T::concat({step0.finalShift, step0.finalScale}, 1);
  EXPECT_LT(maxAbsDiff(final0, at("final_step0").slice(0, 0, 3)), kTolerance);
  EXPECT_EQ(w.blocks.size(), 2u);

  int64_t told = 0;
  const diffusion::H3Latents x = m.sample({at("video"), at("audio")}, condition(),
                                          [&](int64_t step, const diffusion::H3Latents&) { EXPECT_EQ(step, told++); });
  EXPECT_EQ(told, 2);
  expectNear(x, "sample_video", "sample_audio", "2-pass sample");
}

// A pruned checkpoint (adaln_t_table instead of time_embedder.*): the AdaLN inputs read linearly
// between its 1025 grid points, no SiLU after. At full rank its only error is that
// interpolation's against the time embedder's curve: measured 1.1e-6 on a pass.
TEST(H3Model, PrunedAdalnMapNearTheTimeEmbedder) {
  const std::string path = test::editedWeights("h3_tiny.safetensors", "h3_pruned", [](test::Weights& w) {
    for (const char* n : {"proj_in.weight", "proj_in.bias", "proj_out.weight", "proj_out.bias"})
      w.erase(std::string("time_embedder.") + n);
    w["adaln_t_table"] = at("adaln_t_table");
  });
  const diffusion::H3Model m = diffusion::H3Model::load(path);
  std::filesystem::remove(path);
  expectNear(m.forward({at("video"), at("audio")}, at("t_video").item(), at("t_audio").item(), condition()),
             "video_out", "audio_out", "pruned AdaLN map, against the time embedder");
}

// A LoRA in kohya's layout under diffusion_model., merged at load as diffusers reads it.
TEST(H3Model, LoraMergedAsDiffusers) {
  const diffusion::H3Model m = diffusion::H3Model::load(test::diffusionData("h3_tiny.safetensors"),
                                                        {{test::diffusionData("h3_tiny_lora.safetensors"), 1.0}});
  expectNear(m.forward({at("video"), at("audio")}, at("t_video").item(), at("t_audio").item(), condition()),
             "lora_video_out", "lora_audio_out", "with a LoRA");
  // Strength 0 leaves the model as it was.
  const diffusion::H3Model off = diffusion::H3Model::load(test::diffusionData("h3_tiny.safetensors"),
                                                          {{test::diffusionData("h3_tiny_lora.safetensors"), 0.0}});
  expectNear(off.forward({at("video"), at("audio")}, at("t_video").item(), at("t_audio").item(), condition()),
             "video_out", "audio_out", "with a LoRA at strength 0");
}

TEST(H3Model, BadLorasNameTheFileAndTensor) {
  const auto expectLoraError = [](const std::string& name, const std::function<void(test::Weights&)>& edit,
                                  const std::string& tensorName) {
    const std::string path = test::editedWeights("h3_tiny_lora.safetensors", "h3_lora_" + name, edit);
    test::expectLoadError(
        [](const std::string& p) { diffusion::H3Model::load(test::diffusionData("h3_tiny.safetensors"), {{p, 1.0}}); },
        path, tensorName);
  };
  const std::string up = "diffusion_model.blocks.1.mlp.fc1.lora_up.weight";
  expectLoraError("unpaired", [&](test::Weights& w) { w.erase(up); }, "diffusion_model.blocks.1.mlp.fc1.lora_down");
  expectLoraError("shape", [&](test::Weights& w) { w[up] = T::zeros({80, 3}); }, up);
  expectLoraError("module", [](test::Weights& w) { w["diffusion_model.blocks.7.mlp.fc1.lora_up.weight"] = T::zeros({80, 2}); },
                  "blocks.7.mlp.fc1");
  expectLoraError("layout", [](test::Weights& w) { w["diffusion_model.blocks.0.mlp.fc1.dora_scale"] = T::zeros({2}); },
                  "dora_scale");
}

TEST(H3Model, BadInputsAreErrors) {
  diffusion::H3Model m = tiny();
  const diffusion::H3Condition c = condition();
  EXPECT_THROW(m.forward({at("video").slice(2, 0, 3), at("audio")}, 0.5, 0.5, c), Error);  // odd height
  EXPECT_THROW(m.forward({at("video"), at("audio").slice(0, 0, 1)}, 0.5, 0.5, c), Error);  // mono
  EXPECT_THROW(m.forward({at("video"), at("audio")}, 1.5, 0.5, c), Error);
  diffusion::H3Condition wrongTags = c;
  wrongTags.textTags.pop_back();
  EXPECT_THROW(m.forward({at("video"), at("audio")}, 0.5, 0.5, wrongTags), Error);
  diffusion::H3Condition wrongKeyframe = c;
  wrongKeyframe.keyframes[0].latent = at("video");
  EXPECT_THROW(m.forward({at("video"), at("audio")}, 0.5, 0.5, wrongKeyframe), Error);
  EXPECT_THROW(m.prepare(0), Error);
  EXPECT_THROW(m.prepare(2, {12.0, -1.0}), Error);
}

TEST(H3Model, BadFilesNameTheFileAndTensor) {
  expectLoadError("missing", [](test::Weights& w) { w.erase("blocks.1.mlp.fc2.weight"); }, "blocks.1.mlp.fc2.weight");
  expectLoadError("shape", [](test::Weights& w) { w["blocks.0.attn.out_proj.weight"] = T::zeros({48, 60}); },
                  "blocks.0.attn.out_proj.weight");
  expectLoadError("dtype", [](test::Weights& w) { w["final_layer.norm.weight"] = T::zeros({48}, DType::I32); },
                  "final_layer.norm.weight");
  expectLoadError("extra", [](test::Weights& w) { w["blocks.0.extra"] = T::zeros({2}); }, "blocks.0.extra");
  expectLoadError("rope", [](test::Weights& w) { w["rope.inv_freq"] = T::zeros({6}); }, "rope.inv_freq");
  expectLoadError("time", [](test::Weights& w) { w.erase("time_embedder.proj_in.weight"); },
                  "time_embedder.proj_in.weight");
}

namespace {

const std::map<std::string, T::Tensor>& int8Fixture() {
  static const std::map<std::string, T::Tensor> c =
      llm::loadSafetensors(test::diffusionData("h3_tiny_int8_case.safetensors"));
  return c;
}

// max |x - the INT8 fixture's video / audio| (the same shapes).
std::pair<double, double> int8Diff(const diffusion::H3Latents& x, const std::string& run) {
  const T::Tensor &video = int8Fixture().at(run + "_video_out"), &audio = int8Fixture().at(run + "_audio_out");
  EXPECT_EQ(x.video.shape(), video.shape());
  EXPECT_EQ(x.audio.shape(), audio.shape());
  return {maxAbsDiff(x.video, video), maxAbsDiff(x.audio, audio)};
}

}  // namespace

// ComfyUI's pruned INT8 ConvRot repack of the tiny model (make_h3_int8_fixtures.py: names under
// model.diffusion_model., the blocks' qkv / out / fc1 / fc2 as comfy_kitchen's int8_tensorwise
// with ConvRot over 16 and 64 inputs and fc2 unrotated with one scale, the AdaLN map, F16 AdaLN
// biases). The stored codes run as W8A8: against comfy_kitchen's own int8_linear on them, and
// against the F32 forward of the dequantized weights (the activations' 8 bits: outputs up to 3.5,
// measured 8.9e-3 there by the fixture script); a LoRA on INT8 linears merged into their
// dequantized weights. diffusers computes the time embedding where the file has its AdaLN map
// (1e-6 apart). Outputs are within about [-3.5, 3.5]. Measured (x86-64, release build, Zen 5):
// 7.2e-7 from comfy_kitchen's W8A8, 8.9e-3 from the F32 forward, 1.9e-2 from the LoRA's F32
// forward (its three INT8 linears merged in F32, the other five still W8A8).
TEST(H3Model, ComfyInt8FilesRunTheirCodes) {
  const diffusion::H3Model m = diffusion::H3Model::load(test::diffusionData("h3_tiny_int8.safetensors"));
  EXPECT_EQ(m.blocks(), 2);
  const diffusion::H3Latents x =
      m.forward({at("video"), at("audio")}, at("t_video").item(), at("t_audio").item(), condition());
  const auto [w8v, w8a] = int8Diff(x, "w8a8");
  const auto [f32v, f32a] = int8Diff(x, "f32");
  std::printf("INT8 file: max |ours - comfy_kitchen W8A8| video %.3g, audio %.3g; - F32 video %.3g, audio %.3g\n", w8v,
              w8a, f32v, f32a);
  EXPECT_LT(std::max(w8v, w8a), 1e-4);  // one activation code a step off would be about 1e-3
  for (const diffusion::h3::Block& b : diffusion::H3Model::Weights::of(m)->blocks)
    for (const diffusion::Projection* p : {&b.qkv, &b.out, &b.fc1, &b.fc2}) EXPECT_TRUE(p->q.has_value());
  EXPECT_LT(std::max(f32v, f32a), 2e-2);

  const diffusion::H3Model lora = diffusion::H3Model::load(test::diffusionData("h3_tiny_int8.safetensors"),
                                                           {{test::diffusionData("h3_tiny_lora.safetensors"), 1.0}});
  const auto [lv, la] = int8Diff(
      lora.forward({at("video"), at("audio")}, at("t_video").item(), at("t_audio").item(), condition()), "lora");
  std::printf("INT8 file with a LoRA: max |ours - diffusers| video %.3g, audio %.3g\n", lv, la);
  // The adapted INT8 linears run in F32 now, the others on their codes.
  const std::vector<diffusion::h3::Block>& blocks = diffusion::H3Model::Weights::of(lora)->blocks;
  EXPECT_FALSE(blocks[0].qkv.q.has_value());
  EXPECT_FALSE(blocks[1].fc1.q.has_value());
  EXPECT_FALSE(blocks[1].out.q.has_value());
  EXPECT_TRUE(blocks[0].out.q.has_value());
  EXPECT_TRUE(blocks[1].fc2.q.has_value());
  EXPECT_LT(std::max(lv, la), 5e-2);  // the LoRA moves the outputs by up to 3.9
}

// The model on a GPU (the emulator in ctest's emulator_test_diffusion) against the host: one pass
// and the prepared 2-pass sample, F32, the INT8 file's W8A8 linears and the 4-bit W4A8 file's (its
// codes kept at 4 bits on the GPU, their INT8 grid made there at each product), host inputs and GPU ones.
// The same ops in another order of sums (measured on the emulator: 7.2e-7 at most); the INT8
// linears' activation codes could round the other way where the rotation's sums differ (none did).
// Skipped without a GPU.
TEST(H3ModelGpu, PassesAndSampleNearTheHost) {
  const auto gpu = gizhw::gpu::open();
  if (!gpu) GTEST_SKIP() << "no GPU found: GPU test skipped";
  for (const char* file : {"h3_tiny.safetensors", "h3_tiny_int8.safetensors", "h3_tiny_w4a8.safetensors"}) {
    SCOPED_TRACE(file);
    diffusion::H3Model host = diffusion::H3Model::load(test::diffusionData(file));
    host.prepare(2);
    const diffusion::H3Model device = host.to(*gpu);
    const diffusion::H3Latents x{at("video"), at("audio")};
    const double tv = at("t_video").item(), ta = at("t_audio").item();
    const diffusion::H3Latents want = host.forward(x, tv, ta, condition());
    const diffusion::H3Latents got = device.forward({x.video.on(*gpu), x.audio.on(*gpu)}, tv, ta, condition());
    EXPECT_TRUE(got.video.onGpu());
    const double dv = maxAbsDiff(got.video.host(), want.video), da = maxAbsDiff(got.audio.host(), want.audio);
    const diffusion::H3Latents sampled = host.sample(x, condition()), onGpu = device.sample(x, condition());
    const double sv = maxAbsDiff(onGpu.video.host(), sampled.video), sa = maxAbsDiff(onGpu.audio.host(), sampled.audio);
    std::printf("H3 %s on %s vs the host: pass video %.3g, audio %.3g; 2-pass sample video %.3g, audio %.3g\n", file,
                gpu->describe().c_str(), dv, da, sv, sa);
    EXPECT_LT(std::max({dv, da, sv, sa}), 1e-5);
  }
}
