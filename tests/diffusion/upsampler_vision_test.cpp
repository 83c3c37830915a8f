// gizml::diffusion::Upsampler shown an edit's pictures, against
// tests/reference/make_upsampler_vision_fixtures.py: diffusers' Flux2Pipeline.upsample_prompt's
// picture (side by side, within 768 x 768), chat and tokens, and transformers' greedy answer of a
// tiny Qwen 3.5 with its vision tower, converted at 16 bits with the tower kept.
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gizml/vision.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "common/expect_error.h"
#include "diffusion/upsampler_tiny.h"
#include "common/test_paths.h"

using namespace gizml;

namespace {

const nlohmann::json& cases() {
  static const nlohmann::json c = nlohmann::json::parse(std::ifstream(test::zimage::data("upsampler_vl_case.json")));
  return c;
}

std::vector<image::Image> pictures(const nlohmann::json& c) {
  std::vector<image::Image> out;
  for (const std::string file : c["pictures"]) {
    std::ifstream in(test_paths::testData() + "/vision/" + file, std::ios::binary);
    out.push_back(image::decode(std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>())));
  }
  return out;
}

using test::upsampler::visionModelFolder;

}  // namespace

TEST(UpsamplerVision, ShowsThePicturesAsDiffusers) {
  const llm::Model model = llm::load(visionModelFolder());
  for (const nlohmann::json& c : cases()) {
    SCOPED_TRACE(c["prompt"].get<std::string>());
    const vision::Patches patches = vision::patches(diffusion::Upsampler::shownPicture(pictures(c)), {});
    EXPECT_EQ((std::vector<int64_t>{patches.grid.t, patches.grid.h, patches.grid.w}),
              c["grid"].get<std::vector<int64_t>>());
    std::vector<llm::Picture> shown = {{0, tensor::zeros({patches.grid.patches() / 4, 64}), 1,
                                        patches.grid.h / 2, patches.grid.w / 2}};
    const llm::ChatTokens chat = model.chatTokens(diffusion::Upsampler::messages(c["prompt"], true, true), shown);
    EXPECT_EQ(chat.ids, c["tokens"].get<std::vector<llm::TokenId>>());
  }
}

TEST(UpsamplerVision, GreedyAnswerAsTransformers) {
  const diffusion::Upsampler up = diffusion::Upsampler::load(visionModelFolder(), {.temperature = 0, .limit = 12});
  // Not shown the pictures (no tower), the model answers otherwise: the answer reads them.
  const diffusion::Upsampler blind(llm::load(visionModelFolder()), {.temperature = 0, .limit = 12});
  for (const nlohmann::json& c : cases()) {
    EXPECT_EQ(up.caption(c["prompt"], pictures(c)), c["answer"].get<std::string>()) << c["prompt"];
    EXPECT_NE(blind.caption(c["prompt"], pictures(c)), c["answer"].get<std::string>()) << c["prompt"];
  }
}

TEST(UpsamplerVision, BadInputsAreErrors) {
  // The text-only tiny model reads rows of 16 values; the tower gives 64.
  const auto tower =
      std::make_shared<const vision::Tower>(vision::Tower::load(visionModelFolder() + "/vision"));
  expectError([&] { diffusion::Upsampler(llm::load(test::upsampler::modelFolder()), {}, tower); },
              {"rows of 64 values", "reads 16"});
  expectError([] { diffusion::Upsampler::shownPicture({}); }, {"no pictures"});
  expectError([] { diffusion::Upsampler::shownPicture({image::Image{2, 2, std::vector<uint8_t>(5)}}); },
              {"2 x 2 pixels holds 5 bytes"});
}
