// gizml::diffusion::KleinDit against tests/reference/make_klein_dit_fixtures.py: tiny FLUX.2
// [klein] and FLUX.3 DiTs (in_channels 4, 1 + 1 layers, 2 heads of 16, joint 32, axes [4, 4, 4,
// 4], BF16 weights) run by diffusers' Flux2Transformer2DModel and Flux3Transformer2DModel in
// float32 on a seeded latent [1, 4, 3, 4] and 5 text rows, at two sigmas, without and with
// reference latents; loaded from diffusers' names and from BFL's (ComfyUI's) single-file names.
// Also: ComfyUI's Flux2Scheduler sigmas, the Euler step, the INT8 linears' error per layer type,
// bad files and inputs, and the step cache (KleinStepCache) against its rule computed by hand,
// with its refresh of the reference pictures' keys.
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gizml/safetensors.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "common/expect_error.h"
#include "diffusion/int8_linear.h"
#include "diffusion/klein_pass.h"
#include "diffusion/weight_fixture.h"

using namespace gizml;

namespace {

// Relative to the largest |output|: torch sums its matmuls, norms and attention in other orders
// and its exp, sin and cos differ from libm's in the last bit, which the time sinusoid's
// arguments (up to 1000 sigma radians) magnify. Measured (x86-64, release build): max |gizml -
// diffusers| at most 3.6e-6 (FLUX.2) and 5.3e-6 (FLUX.3), relative about 1e-6.
constexpr double kTolerance = 1e-5;

const std::map<std::string, T::Tensor>& fixtureCase() {
  static const std::map<std::string, T::Tensor> c =
      llm::loadSafetensors(test::diffusionData("klein_tiny_case.safetensors"));
  return c;
}

struct Model {
  const char* tag;   // the fixture's names: klein2, klein3
  const char* file;  // without _diffusers / _bfl
  diffusion::KleinDit::Variant variant;
};

const Model kModels[] = {{"klein2", "klein2_tiny", diffusion::KleinDit::Variant::Flux2},
                         {"klein3", "klein3_tiny", diffusion::KleinDit::Variant::Flux3}};

std::string modelPath(const Model& m, const char* layout) {
  return test::diffusionData(std::string(m.file) + "_" + layout + ".safetensors");
}

// Every recorded output of model m against dit's.
void expectForwardAsDiffusers(const Model& m, const diffusion::KleinDit& dit, const char* layout) {
  const auto& c = fixtureCase();
  const std::vector<float> sigmas = c.at("sigmas").toFloats(), targets = c.at("targets").toFloats();
  const T::Tensor latent = c.at("latent"), text = c.at("text"), ref0 = c.at("ref0"), ref1 = c.at("ref1");
  struct Run {
    std::string name;
    std::vector<T::Tensor> refs;
    size_t step;
  };
  const std::vector<Run> runs = {
      {"out0", {}, 0}, {"out1", {}, 1}, {"ref0", {ref0}, 0}, {"ref1", {ref0}, 1}, {"refs0", {ref0, ref1}, 0}};
  for (const Run& r : runs) {
    const T::Tensor& expected = c.at(std::string(m.tag) + "_" + r.name);
    const T::Tensor out = dit.forward(latent, r.refs, text, sigmas[r.step], targets[r.step]);
    ASSERT_EQ(out.shape(), expected.shape());
    const double err = test::maxAbsDiff(out, expected), scale = expected.abs().max().item();
    std::printf("KleinDit %s (%s names) %s: max |gizml - diffusers| = %.3g (of max %.3g)\n", m.tag, layout,
                r.name.c_str(), err, scale);
    EXPECT_LE(err / scale, kTolerance) << m.tag << " " << layout << " " << r.name;
  }
}

}  // namespace

TEST(KleinDit, ForwardAsDiffusersBothLayouts) {
  for (const Model& m : kModels)
    for (const char* layout : {"diffusers", "bfl"}) {
      const diffusion::KleinDit dit = diffusion::KleinDit::load(modelPath(m, layout));
      EXPECT_EQ(dit.variant(), m.variant);
      EXPECT_EQ(dit.flowMap(), m.variant == diffusion::KleinDit::Variant::Flux3);
      EXPECT_EQ(dit.channels(), 4);
      EXPECT_EQ(dit.referenceChannels(), 4);
      EXPECT_EQ(dit.textDim(), 32);
      EXPECT_EQ(dit.dim(), 32);
      expectForwardAsDiffusers(m, dit, layout);
    }
}

// W8A8 block linears (KleinConfig::linears Int8) against F32: relative error max |int8 - f32| /
// max |f32| of the whole forward. Measured (x86-64, release) in the test's output.
constexpr double kInt8Relative = 5e-2;

TEST(KleinDit, Int8LinearsNearF32) {
  const auto& c = fixtureCase();
  const float sigma = c.at("sigmas").toFloats()[0], target = c.at("targets").toFloats()[0];
  for (const Model& m : kModels) {
    diffusion::KleinConfig config;
    const diffusion::KleinDit f32 = diffusion::KleinDit::load(modelPath(m, "bfl"), config);
    config.linears = diffusion::ZImageConfig::Linears::Int8;
    const diffusion::KleinDit int8 = diffusion::KleinDit::load(modelPath(m, "bfl"), config);
    const T::Tensor reference = f32.forward(c.at("latent"), {c.at("ref0")}, c.at("text"), sigma, target);
    const T::Tensor out = int8.forward(c.at("latent"), {c.at("ref0")}, c.at("text"), sigma, target);
    const double rel = test::maxAbsDiff(out, reference) / reference.abs().max().item();
    std::printf("KleinDit %s INT8 linears, whole forward: max |int8 - f32| / max |f32| = %.3g\n", m.tag, rel);
    EXPECT_LE(rel, kInt8Relative);
  }
}

// Each layer type's INT8 linear (ConvRot W8A8) against its F32 product on 64 seeded normal rows:
// RMS(int8 - f32) / RMS(f32), from the tiny FLUX.2 [klein]'s weights (BF16, Kaiming-scaled).
TEST(KleinDit, Int8ErrorPerLayerType) {
  const auto w = llm::loadSafetensors(test::diffusionData("klein2_tiny_bfl.safetensors"));
  const std::pair<const char*, const char*> layers[] = {{"attention qkv", "double_blocks.0.img_attn.qkv.weight"},
                                                        {"attention out", "double_blocks.0.img_attn.proj.weight"},
                                                        {"mlp in", "double_blocks.0.img_mlp.0.weight"},
                                                        {"mlp out", "double_blocks.0.img_mlp.2.weight"},
                                                        {"single fused in", "single_blocks.0.linear1.weight"},
                                                        {"single fused out", "single_blocks.0.linear2.weight"}};
  uint64_t seed = 1;
  for (const auto& [type, name] : layers) {
    const T::Tensor weight = w.at(name).cast(DType::F32).contiguous();
    const T::Tensor x = diffusion::torchRandn(seed++, {64, weight.size(1)});
    const T::Tensor exact = T::matmul(x, weight.transpose(0, 1));
    const T::Tensor q = diffusion::Int8Linear(weight)(x);
    const T::Tensor diff = (T::lazy(q) - T::lazy(exact)).eval();
    const double rel = std::sqrt((T::lazy(diff) * T::lazy(diff)).eval().mean().item() /
                                 (T::lazy(exact) * T::lazy(exact)).eval().mean().item());
    std::printf("KleinDit INT8 %-16s [%lld x %lld]: RMS error / RMS = %.3g\n", type,
                static_cast<long long>(weight.size(0)), static_cast<long long>(weight.size(1)), rel);
    EXPECT_LE(rel, 3e-2) << type;
  }
}

TEST(KleinDit, Flux2SchedulerAsComfyUI) {
  const auto sig = llm::loadSafetensors(test::diffusionData("klein_sigmas.safetensors"));
  for (const auto& [name, expected] : sig) {
    const size_t cut = name.find('_');
    const int64_t steps = std::stoll(name.substr(1, cut - 1)), tokens = std::stoll(name.substr(cut + 1));
    const std::vector<float> got = diffusion::flux2Sigmas(steps, tokens), want = expected.toFloats();
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << name << " sigma " << i;
  }
  // diffusers' compute_empirical_mu at 4096 tokens: above 4300 the 200-step line alone.
  EXPECT_NEAR(diffusion::flux2Mu(6000, 4), 0.00016927 * 6000 + 0.45666666, 1e-12);
  EXPECT_THROW(diffusion::flux2Sigmas(0, 4096), Error);
  EXPECT_THROW(diffusion::flux2Sigmas(4, 0), Error);
}

TEST(KleinDit, EulerStepAsComfyUI) {
  const T::Tensor x = diffusion::torchRandn(3, {2, 5}), den = diffusion::torchRandn(4, {2, 5});
  const float sigma = 0.9673840403556824f, next = 0.9081438779830933f;
  const std::vector<float> xs = x.toFloats(), ds = den.toFloats(),
                           got = diffusion::eulerStep(x, den, sigma, next).toFloats();
  const float dt = next - sigma;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float d = (xs[i] - ds[i]) / sigma;
    const float prod = d * dt;
    EXPECT_EQ(got[i], xs[i] + prod) << i;
  }
  EXPECT_THROW(diffusion::eulerStep(x, T::zeros({5, 2}), sigma, next), Error);
  EXPECT_THROW(diffusion::eulerStep(x, den, 0.0f, 0.0f), Error);
}

namespace {

void expectLoadError(const std::string& path, const std::string& tensorName) {
  test::expectLoadError([](const std::string& p) { diffusion::KleinDit::load(p); }, path, tensorName);
}

std::string edited(const char* file, const std::string& tag, const std::function<void(test::Weights&)>& edit) {
  return test::editedWeights(file, "klein_" + tag, edit);
}

}  // namespace

TEST(KleinDit, BadFilesNameTheTensor) {
  const char* bfl2 = "klein2_tiny_bfl.safetensors";
  const char* diff2 = "klein2_tiny_diffusers.safetensors";
  const char* bfl3 = "klein3_tiny_bfl.safetensors";
  expectLoadError(edited(bfl2, "missing", [](auto& w) { w.erase("double_blocks.0.txt_mlp.2.weight"); }),
                  "double_blocks.0.txt_mlp.2.weight");
  expectLoadError(edited(diff2, "missing_k", [](auto& w) { w.erase("transformer_blocks.0.attn.add_k_proj.weight"); }),
                  "transformer_blocks.0.attn.add_k_proj.weight");
  expectLoadError(edited(bfl2, "shape",
                         [](auto& w) {
                           w.at("single_blocks.0.linear2.weight") = T::zeros({32, 96});
                         }),
                  "single_blocks.0.linear2.weight");
  expectLoadError(edited(diff2, "dtype",
                         [](auto& w) {
                           w.at("proj_out.weight") = T::zeros({4, 32}, DType::I32);
                         }),
                  "proj_out.weight");
  // A guidance embedder (FLUX.2 [dev]'s) is not part of klein.
  expectLoadError(edited(bfl2, "extra",
                         [](auto& w) {
                           w["guidance_in.in_layer.weight"] = T::zeros({32, 256});
                         }),
                  "guidance_in.in_layer.weight");
  expectLoadError(
      edited(bfl3, "missing3",
             [](auto& w) { w.erase("model.diffusion_model.content_mode_blocks.image_cond.0.mlp_in.weight"); }),
      "model.diffusion_model.content_mode_blocks.image_cond.0.mlp_in.weight");
  // A head dim that does not divide the width; RoPE axes that do not make the head dim.
  expectLoadError(
      edited(bfl2, "heads", [](auto& w) { w.at("double_blocks.0.img_attn.norm.query_norm.scale") = T::zeros({6}); }),
      "double_blocks.0.img_attn.norm.query_norm.scale");
  diffusion::KleinConfig axes;
  axes.ropeAxes = {4, 4, 4, 2};
  test::expectLoadError([&](const std::string& p) { diffusion::KleinDit::load(p, axes); },
                        edited(diff2, "axes", [](auto&) {}), "transformer_blocks.0.attn.norm_q.weight");
  // Neither variant's names.
  expectLoadError(edited(bfl2, "neither", [](auto& w) { w.erase("single_stream_modulation.lin.weight"); }),
                  "single_stream_modulation.lin.weight");
}

TEST(KleinDit, BadInputs) {
  const diffusion::KleinDit dit = diffusion::KleinDit::load(test::diffusionData("klein2_tiny_bfl.safetensors"));
  const T::Tensor text = fixtureCase().at("text"), latent = fixtureCase().at("latent");
  EXPECT_THROW(dit.forward(T::zeros({1, 3, 3, 4}), {}, text, 0.5), Error);
  EXPECT_THROW(dit.forward(latent, {T::zeros({1, 5, 2, 2})}, text, 0.5), Error);
  EXPECT_THROW(dit.forward(latent, {}, T::zeros({5, 16}), 0.5), Error);
  EXPECT_THROW(dit.forward(latent, {}, text, 1.5), Error);
  EXPECT_THROW(dit.forward(latent, {}, text, 0.5, -0.1), Error);
}

// ---- The step cache (KleinStepCache) ----

namespace {

// The inputs of an Euler run of `steps` over flux2Sigmas from seeded noise [1, 4, 3, 4] with the
// fixture's text, each step's latent from the plain forward: what a run with the cache would see
// if it skipped nothing. sigmas[i] goes to sigmas[i + 1].
struct Trajectory {
  std::vector<float> sigmas;
  std::vector<T::Tensor> latents;  // one a step
};

Trajectory eulerRun(const diffusion::KleinDit& dit, int64_t steps) {
  Trajectory r{diffusion::flux2Sigmas(steps, 12), {diffusion::torchRandn(7, {1, 4, 3, 4})}};
  for (int64_t i = 0; i + 1 < steps; ++i) {
    const float s = r.sigmas[size_t(i)], next = r.sigmas[size_t(i) + 1];
    const T::Tensor v = dit.forward(r.latents.back(), {}, fixtureCase().at("text"), s, next);
    r.latents.push_back(diffusion::eulerStep(r.latents.back(), r.latents.back().sub(v.mul(T::scalar(s, DType::F32))), s,
                                             next));
  }
  return r;
}

diffusion::KleinPass pass(const diffusion::KleinDit& dit, const Trajectory& r, size_t i) {
  return {dit, r.latents[i], {}, fixtureCase().at("text"), r.sigmas[i], r.sigmas[i + 1]};
}

T::Tensor plus(const T::Tensor& a, const T::Tensor& b) { return (T::lazy(a) + T::lazy(b)).eval(); }
T::Tensor minus(const T::Tensor& a, const T::Tensor& b) { return (T::lazy(a) - T::lazy(b)).eval(); }
double meanAbs(const T::Tensor& x) { return x.abs().mean().item(); }

}  // namespace

// Threshold 0: every step runs every block, bit for bit the plain forward.
TEST(KleinStepCache, OffIsThePlainForward) {
  for (const Model& m : kModels) {
    const diffusion::KleinDit dit = diffusion::KleinDit::load(modelPath(m, "bfl"));
    const Trajectory r = eulerRun(dit, 4);
    diffusion::KleinStepCache cache(0, 4);
    for (size_t i = 0; i < 4; ++i) {
      const T::Tensor& text = fixtureCase().at("text");
      const T::Tensor plain = dit.forward(r.latents[i], {}, text, r.sigmas[i], r.sigmas[i + 1]);
      EXPECT_EQ(dit.forward(r.latents[i], {}, text, r.sigmas[i], r.sigmas[i + 1], cache).toFloats(), plain.toFloats())
          << m.tag << " step " << i;
      EXPECT_FALSE(cache.lastSkipped());
      // The parts the cache cuts the forward into make the forward.
      const diffusion::KleinPass p = pass(dit, r, i);
      EXPECT_EQ(p.out(p.rest()).toFloats(), plain.toFloats()) << m.tag << " step " << i;
    }
    EXPECT_EQ(cache.done(), 4);
    EXPECT_EQ(cache.skipped(), 0);
  }
}

// An infinite threshold skips every step but the first and the last; a skipped step's output is
// the final layer on its image rows after the first blocks plus what the other blocks added to
// them at step 0, computed here by hand from the forward's parts.
TEST(KleinStepCache, SkippedStepsAddTheLastResidual) {
  for (const Model& m : kModels) {
    const diffusion::KleinDit dit = diffusion::KleinDit::load(modelPath(m, "bfl"));
    const Trajectory r = eulerRun(dit, 4);
    const diffusion::KleinPass p0 = pass(dit, r, 0);
    const T::Tensor residual = minus(p0.rest(), p0.first());
    EXPECT_GT(meanAbs(residual), 0.1) << m.tag;  // so that adding it is seen
    diffusion::KleinStepCache cache(std::numeric_limits<double>::infinity(), 4);
    for (size_t i = 0; i < 4; ++i) {
      const T::Tensor& text = fixtureCase().at("text");
      const T::Tensor got = dit.forward(r.latents[i], {}, text, r.sigmas[i], r.sigmas[i + 1], cache);
      const T::Tensor plain = dit.forward(r.latents[i], {}, text, r.sigmas[i], r.sigmas[i + 1]);
      const bool middle = i == 1 || i == 2;
      EXPECT_EQ(cache.lastSkipped(), middle) << m.tag << " step " << i;
      if (!middle) {
        EXPECT_EQ(got.toFloats(), plain.toFloats()) << m.tag << " step " << i;
        continue;
      }
      const diffusion::KleinPass p = pass(dit, r, i);
      EXPECT_EQ(got.toFloats(), p.out(plus(p.first(), residual)).toFloats()) << m.tag << " step " << i;
      std::printf("KleinStepCache %s step %zu skipped: max |cached - plain| = %.3g (of max %.3g)\n", m.tag, i,
                  test::maxAbsDiff(got, plain), plain.abs().max().item());
      EXPECT_GT(test::maxAbsDiff(got, plain), 1e-4) << m.tag << " step " << i;
    }
    EXPECT_EQ(cache.skipped(), 2);
  }
}

// The rule on an 8-step run, by hand: the relative change of what the first blocks add to the
// image rows, mean |r_i - r_(i-1)| / mean |r_(i-1)|, summed since the last step that ran every
// block; a middle step skips while the sum is below the threshold.
TEST(KleinStepCache, SkipsWhileTheSummedChangeIsBelowTheThreshold) {
  constexpr size_t kSteps = 8;
  for (const Model& m : kModels) {
    const diffusion::KleinDit dit = diffusion::KleinDit::load(modelPath(m, "bfl"));
    const Trajectory r = eulerRun(dit, kSteps);
    std::vector<double> change(kSteps, 0.0);
    T::Tensor previous;
    std::printf("KleinStepCache %s changes:", m.tag);
    for (size_t i = 0; i < kSteps; ++i) {
      const diffusion::KleinPass p = pass(dit, r, i);
      const T::Tensor added = minus(p.first(), p.embedded());
      if (i > 0) change[i] = meanAbs(minus(added, previous)) / meanAbs(previous);
      previous = added;
      std::printf(" %.3g", change[i]);
    }
    std::printf("\n");
    std::vector<double> sorted(change.begin() + 1, change.end());
    std::sort(sorted.begin(), sorted.end());
    bool mixed = false;  // some threshold both skips and runs middle steps
    for (double factor : {0.5, 1.0, 2.0, 4.0}) {
      const double threshold = factor * sorted[sorted.size() / 2];
      diffusion::KleinStepCache cache(threshold, kSteps);
      double sum = 0;
      int64_t skipped = 0;
      for (size_t i = 0; i < kSteps; ++i) {
        sum += change[i];
        const bool skip = i > 0 && i + 1 < kSteps && sum < threshold;
        if (!skip) sum = 0;
        skipped += skip;
        dit.forward(r.latents[i], {}, fixtureCase().at("text"), r.sigmas[i], r.sigmas[i + 1], cache);
        EXPECT_EQ(cache.lastSkipped(), skip) << m.tag << " threshold " << threshold << " step " << i;
      }
      EXPECT_EQ(cache.skipped(), skipped);
      mixed = mixed || (skipped > 0 && skipped < int64_t(kSteps) - 2);
    }
    EXPECT_TRUE(mixed) << m.tag;
  }
}

TEST(KleinStepCache, BadUseIsAnError) {
  expectError([] { diffusion::KleinStepCache(-0.1, 4); }, {"threshold", "-0.1", "negative or NaN"});
  expectError([] { diffusion::KleinStepCache(std::nan(""), 4); }, {"threshold", "nan"});
  expectError([] { diffusion::KleinStepCache(0.3, 0); }, {"steps 0"});
  const diffusion::KleinDit dit = diffusion::KleinDit::load(test::diffusionData("klein2_tiny_bfl.safetensors"));
  const T::Tensor& text = fixtureCase().at("text");
  diffusion::KleinStepCache cache(0.3, 2);
  dit.forward(T::zeros({1, 4, 3, 4}), {}, text, 0.9, 0.5, cache);
  expectError([&] { dit.forward(T::zeros({1, 4, 2, 4}), {}, text, 0.5, 0.0, cache); }, {"8 tokens", "run of 12"});
  dit.forward(T::zeros({1, 4, 3, 4}), {}, text, 0.5, 0.0, cache);
  expectError([&] { dit.forward(T::zeros({1, 4, 3, 4}), {}, text, 0.5, 0.0, cache); }, {"2 steps", "all done"});
}

// Refresh 2 with one reference: step 0 runs it and keeps its keys (the plain forward bit for bit),
// step 1 reads them (with step 0's inputs again, the keys it would make itself: the plain forward
// within the float sums' order; without the reference it is far from it), step 2 runs it again.
TEST(KleinStepCache, RefreshReadsTheReferenceKeysItKept) {
  const auto& c = fixtureCase();
  const float sigma = c.at("sigmas").toFloats()[0], target = c.at("targets").toFloats()[0];
  const T::Tensor &latent = c.at("latent"), &text = c.at("text"), &ref = c.at("ref0");
  for (const Model& m : kModels) {
    const diffusion::KleinDit dit = diffusion::KleinDit::load(modelPath(m, "bfl"));
    const T::Tensor plain = dit.forward(latent, {ref}, text, sigma, target);
    const double scale = plain.abs().max().item();
    diffusion::KleinStepCache cache(0, 3, 2);
    EXPECT_EQ(dit.forward(latent, {ref}, text, sigma, target, cache).toFloats(), plain.toFloats()) << m.tag;
    EXPECT_EQ(cache.referenceRuns(), 1);
    const T::Tensor read = dit.forward(latent, {ref}, text, sigma, target, cache);
    EXPECT_EQ(cache.referenceRuns(), 1);
    const double err = test::maxAbsDiff(read, plain) / scale;
    const double without = test::maxAbsDiff(dit.forward(latent, {}, text, sigma, target), plain) / scale;
    std::printf("KleinStepCache %s refresh, keys read: max |read - plain| %.3g, without the reference %.3g "
                "(relative)\n", m.tag, err, without);
    EXPECT_LE(err, kTolerance) << m.tag;
    EXPECT_GT(without, 1e-2) << m.tag;
    EXPECT_EQ(dit.forward(latent, {ref}, text, sigma, target, cache).toFloats(), plain.toFloats()) << m.tag;
    EXPECT_EQ(cache.referenceRuns(), 2);
  }
}

// On an Euler run the keys read at step 1 are step 0's, made from another latent: close to the
// plain forward but not it. Refresh 1 runs the references at every step: the plain forward.
TEST(KleinStepCache, RefreshReadsAnEarlierStepsKeys) {
  const T::Tensor& ref = fixtureCase().at("ref0");
  for (const Model& m : kModels) {
    const diffusion::KleinDit dit = diffusion::KleinDit::load(modelPath(m, "bfl"));
    const Trajectory r = eulerRun(dit, 4);
    const T::Tensor& text = fixtureCase().at("text");
    diffusion::KleinStepCache every(0, 4, 1), second(0, 4, 2);
    for (size_t i = 0; i < 4; ++i) {
      const T::Tensor plain = dit.forward(r.latents[i], {ref}, text, r.sigmas[i], r.sigmas[i + 1]);
      EXPECT_EQ(dit.forward(r.latents[i], {ref}, text, r.sigmas[i], r.sigmas[i + 1], every).toFloats(),
                plain.toFloats()) << m.tag << " step " << i;
      const T::Tensor got = dit.forward(r.latents[i], {ref}, text, r.sigmas[i], r.sigmas[i + 1], second);
      const double err = test::maxAbsDiff(got, plain) / plain.abs().max().item();
      if (i % 2 == 0) {
        EXPECT_EQ(got.toFloats(), plain.toFloats()) << m.tag << " step " << i;
        continue;
      }
      std::printf("KleinStepCache %s refresh 2, step %zu: max |read - plain| %.3g (relative)\n", m.tag, i, err);
      EXPECT_GT(err, 1e-4) << m.tag << " step " << i;
      EXPECT_LT(err, 0.5) << m.tag << " step " << i;
    }
    EXPECT_EQ(every.referenceRuns(), 0);
    EXPECT_EQ(second.referenceRuns(), 2);
  }
}

TEST(KleinStepCache, RefreshRefusesOtherReferences) {
  expectError([] { diffusion::KleinStepCache(0.3, 4, -1); }, {"refresh -1", "negative"});
  const diffusion::KleinDit dit = diffusion::KleinDit::load(test::diffusionData("klein2_tiny_bfl.safetensors"));
  const T::Tensor& text = fixtureCase().at("text");
  diffusion::KleinStepCache cache(0, 3, 3);
  dit.forward(T::zeros({1, 4, 3, 4}), {T::zeros({1, 4, 2, 2})}, text, 0.9, 0.5, cache);
  expectError([&] { dit.forward(T::zeros({1, 4, 3, 4}), {T::zeros({1, 4, 2, 3})}, text, 0.5, 0.2, cache); },
              {"references have 6 tokens", "kept the keys of 4"});
}

// The variant from a file's header alone; another model's file is none, a file that is not
// safetensors an Error.
TEST(KleinDit, VariantOfAFile) {
  for (const Model& m : kModels)
    for (const char* layout : {"diffusers", "bfl"})
      EXPECT_EQ(diffusion::KleinDit::variantOf(modelPath(m, layout)), m.variant) << m.tag << " " << layout;
  EXPECT_EQ(diffusion::KleinDit::variantOf(test::diffusionData("dit_tiny.safetensors")), std::nullopt);
  expectError([] { diffusion::KleinDit::variantOf(test::diffusionData("noise.bin")); }, {"noise.bin"});
}
