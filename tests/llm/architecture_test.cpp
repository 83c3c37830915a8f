// The CPU language models against transformers: tiny random-weight models of each architecture
// (tests/reference/make_model_fixtures.py), converted unquantized (f32), at 16 bits (F16), at 8
// and at 4 bits. Batching and prefill-then-decode give the logits of one pass; bad input is an
// Error.
//
// Measured, max |logit error| over all 61 teacher-forced positions as a share of the logits'
// range (f32 KV cache; F16 adds up to 3.1e-4), greedy tokens equal to transformers' at 8 bits
// (of 32; at 16 bits all 32 of every architecture, which the test requires), 4-bit top-1
// agreement (of 61 positions). Quantized layers run the int8-activation kernels
// (cpu/quant_dot.h), whose activation rounding adds to the weights' (before them, with f32
// activations: 8-bit errors 0.0085 to 0.0187, top-1@4 43/42/48/46/42/39):
//            f32       16 bits   8 bits   greedy@8  top-1@4
//   llama    <5e-7     <5e-7     0.0141   32        43
//   mistral  <5e-7     <5e-7     0.0161   32        42
//   qwen2    <5e-7     <5e-7     0.0162   32        49
//   qwen3    <5e-7     <5e-7     0.0185    2        47
//   qwen3_vl <5e-7     <5e-7     0.0195   32        42
//   gemma3   <5e-7     1e-6      0.0230   32        37
// Unquantized, the models equal transformers to f32 rounding, greedy included. The fixtures'
// weights are BF16 values, which F16 holds exactly from 2^-17 to 65504 (so 16 bits is f32 here
// but for a few tiny weights). On real weights that are not BF16 (Gemma 3's GGUF,
// tests/slow/real_model_test.cpp) F16 is 0.2 % of the range. At 8 bits the error is the
// quantization's (0.46 % RMS per weight) plus the activations' int8 rounding (half a step of
// amax/127 per group of 32): up to 2.5 % of the range at the worst of 31k logits (gemma3 with an
// F16 cache: 0.0248, near the bound of 0.025), more than the lead of the top token at some greedy
// steps of qwen3, whose continuation then parts from transformers'.
#include <gizml/llm.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "llm/formats/safetensors.h"
#include "llm/language_model.h"
#include "llm/quant/converted_model.h"
#include "llm_test_util.h"
#include "model_reference.h"

using namespace gizml;
using namespace gizml::llm;
namespace fs = std::filesystem;

namespace {

class ArchitectureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ArchitectureTest, LogitsMatchTransformers) {
  const Reference ref = readReference(GetParam());
  for (int bits : {kUnquantized, 16, 8}) {
    for (DType kv : {DType::F32, DType::F16}) {
      const std::unique_ptr<LanguageModel> model = buildLanguageModel(converted(GetParam(), bits), {.kvCache = kv});
      double worst = 0;
      for (size_t p = 0; p < ref.prompts.size(); ++p) {
        const std::vector<float> got = logitsOf(*model, ref.prompts[p]);
        ASSERT_EQ(got.size(), ref.logits[p].size());
        worst = std::max(worst, relativeMaxError(got, ref.logits[p]));
      }
      std::printf("%s, %d bits, KV cache %s: max logit error %.6f of the range\n", GetParam().c_str(), bits,
                  dtypeName(kv), worst);
      // 16 bits: issue 7's goal of 1 % of the range; 8 bits: what its quantization allows.
      const double bound = bits == 8 ? 2.5e-2 : bits == 16 ? 1e-2 : kv == DType::F16 ? 1e-3 : 1e-5;
      EXPECT_LT(worst, bound);
    }
  }
}

TEST_P(ArchitectureTest, GreedyContinuationMatchesTransformers) {
  const Reference ref = readReference(GetParam());
  EXPECT_EQ(greedyContinuation(*buildLanguageModel(converted(GetParam(), kUnquantized)), ref), ref.greedy);
  EXPECT_EQ(greedyContinuation(*buildLanguageModel(converted(GetParam(), 16)), ref), ref.greedy);
  // At 8 bits the logits move by up to ~1 % of their range, more than the lead of the top token
  // over the runner-up at some steps of a random model (the fixtures only guarantee 0.3 %), so
  // the continuation may part from transformers'; the tokens before it parts may not shrink.
  const std::map<std::string, size_t> floors = {{"llama", 32}, {"mistral", 9}, {"qwen2", 32},
                                                {"qwen3", 2},   {"qwen3_vl", 32}, {"gemma3", 32}};
  const std::vector<int32_t> got = greedyContinuation(*buildLanguageModel(converted(GetParam(), 8)), ref);
  const size_t same = static_cast<size_t>(std::mismatch(got.begin(), got.end(), ref.greedy.begin()).first - got.begin());
  std::printf("%s at 8 bits: greedy continuation agrees for %zu of %zu tokens\n", GetParam().c_str(), same, got.size());
  EXPECT_GE(same, floors.at(GetParam()));
}

TEST_P(ArchitectureTest, TopOneAgreementAt4Bits) {
  // Floors: the positions measured at 4 bits less three, so that it cannot regress.
  const std::map<std::string, int> floors = {{"llama", 40}, {"mistral", 39}, {"qwen2", 45},
                                             {"qwen3", 43}, {"qwen3_vl", 39}, {"gemma3", 36}};
  const Reference ref = readReference(GetParam());
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(converted(GetParam(), 4));
  const int64_t vocab = model->config().vocabSize;
  int agree = 0, total = 0;
  for (size_t p = 0; p < ref.prompts.size(); ++p) {
    const std::vector<float> got = logitsOf(*model, ref.prompts[p]);
    for (size_t t = 0; t < ref.prompts[p].size(); ++t, ++total)
      agree += argmax(&got[t * vocab], vocab) == argmax(&ref.logits[p][t * vocab], vocab);
  }
  const double share = static_cast<double>(agree) / total;
  std::printf("%s at 4 bits: top-1 agrees at %d of %d positions (%.3f)\n", GetParam().c_str(), agree, total, share);
  EXPECT_GE(agree, floors.at(GetParam()));
}

TEST_P(ArchitectureTest, BatchedSequencesGiveTheirOwnLogits) {
  expectBatchedRowsAlone(*buildLanguageModel(converted(GetParam(), 8)), readReference(GetParam()));
}

TEST_P(ArchitectureTest, PrefillThenDecodeGivesTheLogitsOfOnePass) {
  const Reference ref = readReference(GetParam());
  // 16-bit layers; a prefill, its decode steps and a second read after truncating give the same
  // bits (batch invariance).
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(converted(GetParam(), 16));
  const std::vector<int32_t>& prompt = ref.prompts[3];
  const std::vector<float> once = logitsOf(*model, prompt);
  const int64_t vocab = model->config().vocabSize, split = 20;
  const std::unique_ptr<SequenceState> state = model->newState(static_cast<int64_t>(prompt.size()));
  std::vector<float> steps =
      model->forward({{state.get(), std::vector<int32_t>(prompt.begin(), prompt.begin() + split), true}})[0].toFloats();
  for (size_t t = split; t < prompt.size(); ++t) {
    const std::vector<float> row = model->forward({{state.get(), {prompt[t]}}})[0].toFloats();
    steps.insert(steps.end(), row.begin(), row.end());
  }
  ASSERT_EQ(steps.size(), prompt.size() * vocab);
  EXPECT_EQ(steps, once);

  // Truncating and feeding again gives the same logits too.
  state->truncate(split);
  const std::vector<float> again =
      model->forward({{state.get(), std::vector<int32_t>(prompt.begin() + split, prompt.end()), true}})[0].toFloats();
  EXPECT_EQ(again, std::vector<float>(once.begin() + split * vocab, once.end()));
}

INSTANTIATE_TEST_SUITE_P(Architectures, ArchitectureTest,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "qwen3_vl", "gemma3"),
                         [](const auto& info) { return info.param; });

TEST(ModelErrors, MissingTensorIsNamed) {
  const std::string folder = editedModel("missing", [](nlohmann::json& m) {
    entry(m, "model.layers.1.mlp.up_proj.weight")["name"] = "model.layers.1.mlp.unused.weight";
  });
  expectError([&] { buildLanguageModel(ConvertedModel::open(folder)); }, {"model.layers.1.mlp.up_proj.weight"});
}

TEST(ModelErrors, WrongShapeIsNamed) {
  // q_proj [64, 64] and k_proj [32, 64] swap names: q_proj, read first, now has k's shape.
  const std::string folder = editedModel("shape", [](nlohmann::json& m) {
    entry(m, "model.layers.0.self_attn.q_proj.weight")["name"] = "swap";
    entry(m, "model.layers.0.self_attn.k_proj.weight")["name"] = "model.layers.0.self_attn.q_proj.weight";
    entry(m, "swap")["name"] = "model.layers.0.self_attn.k_proj.weight";
  });
  expectError([&] { buildLanguageModel(ConvertedModel::open(folder)); },
              {"model.layers.0.self_attn.q_proj.weight", "has shape [32, 64]", "expects [64, 64]"});
}

TEST(ModelErrors, FeedingPastCapacityIsAnError) {
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(converted("llama", 8));
  const std::unique_ptr<SequenceState> state = model->newState(4);
  expectError([&] { model->forward({{state.get(), {1, 2, 3, 4, 5}}}); }, {"capacity of 4"});
  model->forward({{state.get(), {1, 2, 3}}});
  expectError([&] { model->forward({{state.get(), {4, 5}}}); }, {"2 tokens after 3", "capacity of 4"});
  EXPECT_EQ(state->length(), 3);
  expectError([&] { model->forward({{state.get(), {512}}}); }, {"token 512", "vocabulary of 512"});
  expectError([&] { model->forward({{state.get(), {1}}, {state.get(), {2}}}); }, {"fed twice"});
  const std::unique_ptr<LanguageModel> other = buildLanguageModel(converted("llama", 8));
  expectError([&] { other->forward({{state.get(), {1}}}); }, {"not made by this model"});
}

}  // namespace
