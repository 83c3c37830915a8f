// gizml::diffusion::Upsampler against tests/reference/make_upsampler_fixtures.py: diffusers'
// Flux2Pipeline.upsample_prompt's chat (BFL's system prompts, for text to image and for an edit)
// rendered by Qwen3's real template, and transformers' greedy answer of a tiny Qwen3 converted
// unquantized; bad inputs named.
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/expect_error.h"
#include "diffusion/upsampler_tiny.h"

using namespace gizml;

namespace {

const nlohmann::json& cases() {
  static const nlohmann::json c = nlohmann::json::parse(std::ifstream(test::zimage::data("upsampler_case.json")));
  return c;
}

using test::upsampler::modelFolder;

diffusion::Upsampler greedyUpsampler() {
  return diffusion::Upsampler::load(modelFolder(), {.temperature = 0, .limit = 12});
}

}  // namespace

TEST(Upsampler, ChatAsDiffusers) {
  const llm::Model model = llm::load(modelFolder());
  for (const nlohmann::json& c : cases()) {
    const nlohmann::ordered_json messages = diffusion::Upsampler::messages(c["prompt"], c["edit"]);
    EXPECT_EQ(model.chatPrompt(messages), c["chat"].get<std::string>()) << c["prompt"];
    EXPECT_EQ(model.chatTokens(messages).ids, c["tokens"].get<std::vector<llm::TokenId>>()) << c["prompt"];
  }
}

TEST(Upsampler, GreedyAnswerAsTransformers) {
  const diffusion::Upsampler up = greedyUpsampler();
  for (const nlohmann::json& c : cases()) {
    std::vector<image::Image> pictures;
    if (c["edit"]) pictures.push_back(image::Image{2, 2, std::vector<uint8_t>(12, 128)});
    EXPECT_EQ(up.caption(c["prompt"], pictures), c["answer"].get<std::string>()) << c["prompt"];
  }
}

// Sampling at the default temperature: the same seed gives the same answer; the answer is text.
TEST(Upsampler, SampledAnswersRepeatWithTheSeed) {
  const diffusion::Upsampler a = diffusion::Upsampler::load(modelFolder(), {.limit = 12, .seed = 7});
  const diffusion::Upsampler b = diffusion::Upsampler::load(modelFolder(), {.limit = 12, .seed = 7});
  const std::string prompt = cases()[0]["prompt"];
  const std::string first = a.caption(prompt);
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(first, b.caption(prompt));
}

TEST(Upsampler, BadInputsAreAnError) {
  expectError([] { greedyUpsampler().caption(" \n"); }, {"prompt is empty"});
  expectError([] { diffusion::Upsampler::load(modelFolder(), {.temperature = -1}); }, {"temperature"});
  expectError([] { diffusion::Upsampler::load(modelFolder(), {.limit = 0}); }, {"limit"});
  expectError([] { diffusion::Upsampler::load("/nonexistent/upsampler"); }, {"/nonexistent/upsampler"});
}
