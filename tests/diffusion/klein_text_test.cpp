// gizml::diffusion::KleinText and convertTextEncoder against
// tests/reference/make_klein_text_fixtures.py: diffusers' Flux2KleinPipeline._get_qwen3_prompt_embeds
// on a tiny Qwen3 of 28 layers (hidden 16, Qwen3's real tokenizer) for two prompts: the
// template's tokens and the 512 rows of hidden states 9, 18 and 27 side by side, the padding's
// included.
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gizml/safetensors.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/expect_error.h"
#include "diffusion/zimage_tiny.h"
#include "common/test_paths.h"

using namespace gizml;
namespace fs = std::filesystem;

namespace {

using test::zimage::data;
using test::temporary;

// make_klein_text_fixtures.py's PROMPTS.
const std::vector<std::string> kPrompts = {
    "A red fox in fresh snow, watercolor",
    "Ein Leuchtturm bei Nacht, 35 mm film grain; \u00abneon\u00bb signs reading 'OPEN 24/7'"};

// The rows against transformers in f32: F16 weights (the tiny model's are BF16 values, which F16
// holds) and f32 sums in other orders through 27 layers. Measured (x86-64, release): 1.0e-6 of
// the range of states up to 17; the bound is 1e-5, as tests/llm/hidden_test.cpp's.
constexpr double kTextTolerance = 1e-5;

const std::map<std::string, T::Tensor>& fixture() {
  static const auto c = llm::loadSafetensors(data("klein_text_case.safetensors"));
  return c;
}

// The tiny encoder's Hugging Face folder, written once a process.
const std::string& hfFolder() {
  static const std::string folder = [] {
    const std::string out = temporary("klein_text_hf");
    test::zimage::writeTextHf(out, {}, "klein_text_tiny");
    return out;
  }();
  return folder;
}

// convertTextEncoder's folder of it, made once a process.
const std::string& textFolder() {
  static const std::string folder = [] {
    const std::string out = temporary("klein_text");
    fs::remove_all(out);
    diffusion::convertTextEncoder(hfFolder(), out);
    return out;
  }();
  return folder;
}

const diffusion::KleinText& text() {
  static const diffusion::KleinText t = diffusion::KleinText::load(textFolder());
  return t;
}

// Max |got - want| over want's range.
double relativeError(const T::Tensor& got, const T::Tensor& want) {
  const std::vector<float> a = got.toFloats(), b = want.toFloats();
  EXPECT_EQ(a.size(), b.size());
  double worst = 0, range = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])));
    range = std::max(range, std::fabs(double(b[i])));
  }
  return worst / range;
}

std::vector<llm::TokenId> ids(const T::Tensor& t) {
  const std::vector<float> v = t.toFloats();
  return {v.begin(), v.end()};
}

}  // namespace

TEST(KleinText, ConvertKeepsTheLayersUpToTheLastState) {
  const nlohmann::json manifest = nlohmann::json::parse(std::ifstream(textFolder() + "/manifest.json"));
  EXPECT_EQ(manifest["kept_layers"], 27);
  for (const nlohmann::json& t : manifest["tensors"]) {
    const std::string name = t["name"];
    EXPECT_EQ(name.find("model.layers.27."), std::string::npos) << name;
    EXPECT_NE(name, "model.norm.weight");
  }
  EXPECT_EQ(text().width(), 48);
  // A whole model's folder gives the same rows: only the layers up to the last state are read.
  const std::string whole = temporary("klein_text_whole");
  fs::remove_all(whole);
  llm::convert(hfFolder(), whole, llm::Bits{.layers = 16, .head = 16});
  EXPECT_EQ(diffusion::KleinText::load(whole).condition(kPrompts[0]).toFloats(),
            text().condition(kPrompts[0]).toFloats());
}

TEST(KleinText, RowsAsDiffusers) {
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    const std::string n = std::to_string(i);
    EXPECT_EQ(text().promptTokens(kPrompts[i]), ids(fixture().at("tokens_" + n)));
    const T::Tensor rows = text().condition(kPrompts[i]);
    ASSERT_EQ(rows.shape(), (T::Shape{512, 48}));
    const double error = relativeError(rows, fixture().at("text_" + n));
    std::printf("prompt %zu: max error %.2e of the range\n", i, error);
    EXPECT_LT(error, kTextTolerance);
  }
}

TEST(KleinText, TheMaskEndsAtTheFirstPaddingToken) {
  // As ComfyUI's: a prompt holding <|endoftext|> masks every key from it on, so the rows before it
  // are those of the prompt cut there, bit for bit.
  const std::string cut = "A red fox", padded = cut + "<|endoftext|> in fresh snow";
  const std::vector<llm::TokenId> tokens = text().promptTokens(padded), cutTokens = text().promptTokens(cut);
  const auto before = std::find(tokens.begin(), tokens.end(), 151643) - tokens.begin();
  ASSERT_TRUE(std::equal(tokens.begin(), tokens.begin() + before, cutTokens.begin()));
  EXPECT_EQ(text().condition(padded).slice(0, 0, before).contiguous().toFloats(),
            text().condition(cut).slice(0, 0, before).contiguous().toFloats());
}

TEST(KleinText, LongPromptsAreNotTruncated) {
  // ComfyUI keeps every token past 512 (diffusers would cut the template there).
  std::string prompt;
  for (int i = 0; i < 300; ++i) prompt += "snow fox ";
  const auto tokens = static_cast<int64_t>(text().promptTokens(prompt).size());
  ASSERT_GT(tokens, 512);
  EXPECT_EQ(text().condition(prompt).shape(), (T::Shape{tokens, 48}));
  std::string tooLong;
  for (int i = 0; i < 600; ++i) tooLong += "snow fox ";
  expectError([&] { text().condition(tooLong); }, {"exceed", "1024"});
}

TEST(KleinText, QwenVlTextIsConverted) {
  // Qwen3-VL's language model (model.language_model.*), the vision tower left out: its states are
  // transformers' (tests/data/models/qwen3_vl/hidden.safetensors, hidden_1, the tiny VL's prompt 2).
  const std::string models = test_paths::testData() + "/models/qwen3_vl/";
  const std::string hf = temporary("klein_vl_hf"), out = temporary("klein_vl");
  fs::remove_all(hf);
  fs::copy(models + "hf", hf);
  test::zimage::copyTokenizer(hf);  // load needs one; hidden reads none of it
  fs::remove_all(out);
  diffusion::convertTextEncoder(hf, out, {1});
  const nlohmann::json reference = nlohmann::json::parse(std::ifstream(models + "reference.json"));
  const std::vector<llm::TokenId> prompt = reference["prompts"][2];
  const T::Tensor got = llm::load(out).engine(1, 64).hidden(prompt, {1});
  const T::Tensor want = llm::loadSafetensors(models + "hidden.safetensors").at("hidden_1");
  EXPECT_LT(relativeError(got, want), kTextTolerance);
}

TEST(KleinText, BadInputsAreAnError) {
  const std::string out = temporary("klein_text_refused");
  const std::string llama = test_paths::testData() + "/models/llama/hf";
  expectError([&] { diffusion::convertTextEncoder(llama, out); }, {llama, "qwen3", "llama"});
  expectError([&] { diffusion::convertTextEncoder(hfFolder(), out, {9, 29}); }, {hfFolder(), "layer 29", "28 layers"});
  expectError([&] { diffusion::convertTextEncoder(hfFolder(), out, {}); }, {"no hidden states"});
  expectError([&] { diffusion::convertTextEncoder(hfFolder(), out, {0, 9}); }, {"hidden state 0"});
  expectError([&] { diffusion::convertTextEncoder("/nonexistent/qwen3", out); }, {"/nonexistent/qwen3"});
  expectError([&] { diffusion::KleinText::load(textFolder(), {.layers = {9, 28}}); }, {textFolder(), "28"});
  expectError([&] { diffusion::KleinText::load(textFolder(), {.layers = {}}); }, {"no hidden states"});
  expectError([&] { diffusion::KleinText::load(textFolder(), {.layers = {-1}}); }, {"hidden state -1"});
  expectError([&] { diffusion::KleinText::load(textFolder(), {.minTokens = 0}); }, {"minTokens 0"});
  expectError([&] { diffusion::KleinText::load("/nonexistent/klein"); }, {"/nonexistent/klein"});
}
