// Models built with only their first layers (ModelOptions::layers, LoadOptions::layers) and the
// hidden states Engine::hidden gives, against transformers' (tests/reference/make_hidden_fixtures.py:
// hidden_states[N] of each tiny fixture's 17-token prompt, for N = half the layers and all).
//
// Measured, max |error| as a share of the reference's range, over both Ns, unquantized (f32) and
// at 16 bits (F16), with the default f32 KV cache:
//   llama 2.1e-7, mistral 1.9e-7, qwen2 1.6e-7, qwen3 3.0e-7, qwen3_vl 2.2e-7, gemma3 4.1e-7,
//   qwen3_5 4.3e-6, qwen3_5_moe 2.4e-6 (the Gated DeltaNet layers' sums in another order)
// The fixtures' weights are BF16 values, which F16 holds exactly (but for a few tiny ones), so
// both are f32 rounding alone; the bound is 1e-5 of the range.
//
// Several layers in one pass with padding (Engine::hidden(prompt, layers, attended)), against
// transformers' hidden_states[0 .. all] with an attention_mask of 9 ones then 8 zeros
// (make_hidden_fixtures.py masked), unquantized: llama, qwen2 and qwen3 all within
// 3e-7 of the range; the same bound.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "llm/formats/safetensors.h"
#include "llm/language_model.h"
#include "llm/quant/converted_model.h"
#include "llm_test_util.h"
#include "model_reference.h"
#include "mtp_fixture.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

/// transformers' hidden states of the fixture: per N, [tokens, hidden].
std::map<int64_t, std::vector<float>> referenceHidden(const std::string& arch) {
  const SafetensorsFile file(modelData(arch) + "/hidden.safetensors");
  std::map<int64_t, std::vector<float>> out;
  for (const auto& info : file.tensors()) out[std::stoll(info.name.substr(std::string("hidden_").size()))] = file.load(info).toFloats();
  return out;
}

/// An engine on the model (no tokenizer: hidden states need none).
Engine engineOn(std::unique_ptr<LanguageModel> model, int64_t maxTokens) {
  return Engine(std::shared_ptr<LanguageModel>(std::move(model)), nullptr, {}, 1, maxTokens);
}

const std::vector<int32_t>& prompt(const Reference& ref) { return ref.prompts[2]; }

class HiddenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HiddenTest, FirstLayersGiveTransformersHiddenStates) {
  const Reference ref = readReference(GetParam());
  const std::map<int64_t, std::vector<float>> want = referenceHidden(GetParam());
  ASSERT_EQ(want.size(), 2u);
  for (int bits : {kUnquantized, 16}) {
    double worst = 0;
    for (const auto& [layers, states] : want) {
      std::unique_ptr<LanguageModel> model = buildLanguageModel(converted(GetParam(), bits), {.layers = layers});
      ASSERT_EQ(model->config().numLayers, layers);
      const tensor::Tensor got = engineOn(std::move(model), 64).hidden(prompt(ref));
      ASSERT_EQ(got.shape(), (tensor::Shape{static_cast<int64_t>(prompt(ref).size()), 64}));
      worst = std::max(worst, relativeMaxError(got.toFloats(), states));
    }
    std::printf("%s, %d bits: max hidden-state error %.2e of the range\n", GetParam().c_str(), bits, worst);
    EXPECT_LT(worst, 1e-5);
  }
}

TEST_P(HiddenTest, OnlyAWholeModelGivesLogits) {
  const ConvertedModel& weights = converted(GetParam(), 16);
  const int64_t all = weights.config().numLayers;
  const std::vector<int32_t> tokens = prompt(readReference(GetParam()));
  // All layers, asked for or by default: a whole model, whose hidden states are those of the
  // first `all` layers.
  Engine whole = engineOn(buildLanguageModel(weights, {.layers = all}), 64);
  EXPECT_EQ(whole.generate({request(tokens, 2)})[0].tokens.size(), 2u);
  EXPECT_EQ(whole.hidden(tokens).toFloats(), engineOn(buildLanguageModel(weights), 64).hidden(tokens).toFloats());

  std::unique_ptr<LanguageModel> first = buildLanguageModel(weights, {.layers = 1});
  EXPECT_FALSE(first->hasLogits());
  const std::unique_ptr<SequenceState> state = first->newState(8);
  expectError([&] { first->forward({{state.get(), {5}}}); }, {"first 1 of " + std::to_string(all) + " layers"});
  Engine partial = engineOn(std::move(first), 64);
  expectError([&] { partial.add(request(tokens, 2)); }, {"first 1 layers", "hidden states, not text"});
  EXPECT_EQ(partial.running(), 0);
  EXPECT_EQ(partial.hidden(tokens).shape()[0], static_cast<int64_t>(tokens.size()));
}

INSTANTIATE_TEST_SUITE_P(Architectures, HiddenTest,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "qwen3_vl", "gemma3", "qwen3_5",
                                           "qwen3_5_moe"),
                         [](const auto& info) { return info.param; });

class MaskedHiddenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MaskedHiddenTest, SeveralLayersWithPaddingGiveTransformersStates) {
  const SafetensorsFile file(modelData(GetParam()) + "/masked_hidden.safetensors");
  const int64_t attended = file.load("attended").contiguous().data<int64_t>()[0];
  const std::vector<int32_t> tokens = prompt(readReference(GetParam()));
  const auto n = static_cast<int64_t>(tokens.size());
  const ConvertedModel& weights = converted(GetParam(), kUnquantized);
  const int64_t all = weights.config().numLayers, hidden = weights.config().hiddenSize;
  // Out of order and repeated, as a caller may ask.
  const std::vector<int64_t> layers = {all, 0, 1, all};
  const tensor::Tensor got = engineOn(buildLanguageModel(weights), 64).hidden(tokens, layers, attended);
  ASSERT_EQ(got.shape(), (tensor::Shape{n, 4 * hidden}));
  double worst = 0;
  for (size_t k = 0; k < layers.size(); ++k) {
    const int64_t at = static_cast<int64_t>(k) * hidden;
    const std::vector<float> want = file.load("hidden_" + std::to_string(layers[k])).toFloats();
    worst = std::max(worst, relativeMaxError(got.slice(1, at, at + hidden).contiguous().toFloats(), want));
  }
  std::printf("%s: max error of the padded states %.2e of the range\n", GetParam().c_str(), worst);
  EXPECT_LT(worst, 1e-5);
  // The attended tokens see no padding: their states are those of the prompt cut there.
  const std::vector<int32_t> cut(tokens.begin(), tokens.begin() + attended);
  EXPECT_EQ(got.slice(0, 0, attended).contiguous().toFloats(),
            engineOn(buildLanguageModel(weights), 64).hidden(cut, layers).toFloats());
}

INSTANTIATE_TEST_SUITE_P(Architectures, MaskedHiddenTest, ::testing::Values("llama", "qwen2", "qwen3"),
                         [](const auto& info) { return info.param; });

TEST(Hidden, SeveralLayersAreEachLayersStates) {
  const std::vector<int32_t> tokens = prompt(readReference("qwen3"));
  const ConvertedModel& weights = converted("qwen3", 16);
  const tensor::Tensor both = engineOn(buildLanguageModel(weights), 64).hidden(tokens, {1, 2});
  for (int64_t layers : {1, 2})
    EXPECT_EQ(both.slice(1, (layers - 1) * 64, layers * 64).contiguous().toFloats(),
              engineOn(buildLanguageModel(weights, {.layers = layers}), 64).hidden(tokens).toFloats());
  // Attending every token is no padding.
  EXPECT_EQ(engineOn(buildLanguageModel(weights), 64).hidden(tokens, {1, 2}, static_cast<int64_t>(tokens.size())).toFloats(),
            both.toFloats());
}

TEST(Hidden, BadLayersOrPaddingAreAnError) {
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  Engine e = engineOn(buildLanguageModel(converted("qwen3", 8)), 8);
  expectError([&] { e.hidden(tokens, {}); }, {"no layers"});
  expectError([&] { e.hidden(tokens, {1, 3}); }, {"layer 3", "2 layers"});
  expectError([&] { e.hidden(tokens, {-1}); }, {"layer -1"});
  expectError([&] { e.hidden(tokens, {1}, -1); }, {"attended -1", "4 tokens"});
  expectError([&] { e.hidden(tokens, {1}, 5); }, {"attended 5", "4 tokens"});
  // Gemma 3's sliding windows would leave padding far from the prompt no keys at all.
  Engine gemma = engineOn(buildLanguageModel(converted("gemma3", 8)), 8);
  expectError([&] { gemma.hidden(tokens, {1}, 2); }, {"padding", "sliding-window"});
  EXPECT_NO_THROW(gemma.hidden(tokens, {1}, 4));
}

TEST(Hidden, LayersOutsideTheModelAreAnError) {
  const ConvertedModel& weights = converted("llama", 8);
  for (int64_t layers : {-1, 3})
    expectError([&] { buildLanguageModel(weights, {.layers = layers}); }, {"layers " + std::to_string(layers), "model's 2"});
}

TEST(Hidden, BadPromptsAreAnError) {
  Engine e = engineOn(buildLanguageModel(converted("llama", 8), {.layers = 1}), 4);
  expectError([&] { e.hidden({}); }, {"prompt is empty"});
  expectError([&] { e.hidden({1, 2, 3, 4, 5}); }, {"5 tokens", "4-token"});
  expectError([&] { e.hidden({1, 512}); }, {"token 512", "vocabulary of 512"});
}

TEST(Hidden, LoadTakesTheFirstLayers) {
  // The converted llama with a tokenizer (Qwen3's: load needs one, hidden reads none of it).
  const std::string folder = loadableLlama("load");
  const std::vector<int32_t> tokens = prompt(readReference("llama"));
  EXPECT_EQ(load(folder, {.layers = 1}).engine(1, 64).hidden(tokens).toFloats(),
            engineOn(buildLanguageModel(converted("llama", 8), {.layers = 1}), 64).hidden(tokens).toFloats());
  expectError([&] { load(folder, {.layers = 1}).engine(1, 64).add(request(tokens, 1)); }, {"first 1 layers"});
  expectError([&] { load(folder, {.layers = 3}); }, {folder, "layers 3", "model's 2"});
  EXPECT_EQ(load(folder).engine(1, 64).generate({request(tokens, 1)})[0].tokens.size(), 1u);
}

TEST(Hidden, FirstLayersReadNoOtherTensor) {
  // Without the second layer, the final norm and the output layer in its manifest, the model
  // loads its first layer alone, and its hidden states are those of the whole folder's first layer.
  const std::string folder = editedModel("first_layer", [](nlohmann::json& m) {
    nlohmann::json kept = nlohmann::json::array();
    for (const nlohmann::json& t : m["tensors"]) {
      const std::string name = t["name"];
      if (name.rfind("model.layers.1.", 0) != 0 && name != "model.norm.weight" && name != "lm_head.weight")
        kept.push_back(t);
    }
    m["tensors"] = kept;
  });
  const ConvertedModel cut = ConvertedModel::open(folder);
  expectError([&] { buildLanguageModel(cut); }, {"no tensor named"});
  const std::vector<int32_t> tokens = prompt(readReference("llama"));
  EXPECT_EQ(engineOn(buildLanguageModel(cut, {.layers = 1}), 64).hidden(tokens).toFloats(),
            engineOn(buildLanguageModel(converted("llama", 8), {.layers = 1}), 64).hidden(tokens).toFloats());
}

TEST(Hidden, QwenWithMtpLoadsItsFirstLayersWithoutIt) {
  // The MTP layer reads the last layer's output: a model of fewer layers leaves it out (and
  // drafts nothing); its hidden states are those of the same model without an MTP layer.
  const std::string hf = freshFolder("mtp_hf");
  writeQwen35WithMtp(modelData("qwen3_5"), hf, false);
  const std::string out = freshFolder("mtp");
  convert(hf, out, Bits{.layers = 8, .head = 8, .group = 256});  // unquantized, as converted(.., kUnquantized)
  const ConvertedModel withMtp = ConvertedModel::open(out);
  ASSERT_EQ(withMtp.config().mtpLayers, 1);
  EXPECT_TRUE(buildLanguageModel(withMtp)->drafts());
  const std::unique_ptr<LanguageModel> first = buildLanguageModel(withMtp, {.layers = 4});
  EXPECT_FALSE(first->drafts());
  const std::vector<int32_t> tokens = prompt(readReference("qwen3_5"));
  EXPECT_EQ(first->hidden(tokens, {4}, 0).toFloats(),
            buildLanguageModel(converted("qwen3_5", kUnquantized), {.layers = 4})->hidden(tokens, {4}, 0).toFloats());
}

}  // namespace
