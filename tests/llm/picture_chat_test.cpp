// Model::chatTokens with pictures against transformers' processor (Qwen3.5's template, Qwen3's
// tokenizer, the PIL image processor: tests/reference/make_picture_chat_fixtures.py): the token
// ids, each picture's run of placeholders, and where its rows start.
#include <gizml/image.h>
#include <gizml/llm.h>
#include <gizml/vision.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "common/expect_error.h"
#include "fake_model.h"
#include "common/test_paths.h"

using namespace gizml;
using namespace gizml::llm;
using nlohmann::ordered_json;

namespace {

const std::string kVision = test_paths::testData() + "/vision/";

Model qwen35Chat() {
  const std::string shared = test_paths::sharedData();
  auto tokenizer = std::make_shared<const Tokenizer>(Tokenizer::fromJson(shared + "/tokenizers/qwen3"));
  std::ifstream in(shared + "/templates/Qwen3.5-4B.jinja");
  const std::string chatTemplate((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return Model(std::make_shared<fake::FakeModel>(static_cast<int64_t>(tokenizer->vocabSize())), tokenizer, chatTemplate);
}

image::Image picture(const std::string& file) {
  std::ifstream in(kVision + file, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return image::decode(bytes);
}

TEST(PictureChat, TokensAreTransformersProcessors) {
  const Model model = qwen35Chat();
  const ordered_json cases = ordered_json::parse(std::ifstream(kVision + "chats.json"));
  const TokenId pad = model.tokenizer().tokenToId("<|image_pad|>");
  for (const ordered_json& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<Picture> pictures;
    for (size_t i = 0; i < c["pictures"].size(); ++i) {
      // The grid the patches give (vision::patches), the rows as a tower would give them.
      const vision::Grid g = vision::patches(picture(c["pictures"][i]), {}).grid;
      ASSERT_EQ((std::vector<int64_t>{g.t, g.h, g.w}), c["grids"][i].get<std::vector<int64_t>>());
      pictures.push_back({-1, tensor::zeros({g.patches() / 4, 8}), g.t, g.h / 2, g.w / 2});
    }
    const ChatTokens chat = model.chatTokens(c["messages"], pictures);
    EXPECT_EQ(chat.ids, c["ids"].get<std::vector<TokenId>>());
    for (const Picture& p : pictures) {
      ASSERT_GE(p.first, 1);
      ASSERT_LE(p.first + p.rows.size(0), static_cast<int64_t>(chat.ids.size()));
      EXPECT_NE(chat.ids[static_cast<size_t>(p.first - 1)], pad);  // <|vision_start|>
      for (int64_t r = 0; r < p.rows.size(0); ++r) EXPECT_EQ(chat.ids[static_cast<size_t>(p.first + r)], pad);
      EXPECT_NE(chat.ids[static_cast<size_t>(p.first + p.rows.size(0))], pad);  // <|vision_end|>
    }
    // Each message ends where the text alone ends, moved by the rows before it.
    EXPECT_EQ(chat.ends.size(), c["messages"].size());
    EXPECT_EQ(chat.ends.back(), chat.ids.size() - model.chatTokens(c["messages"]).ids.size() + model.chatTokens(c["messages"]).ends.back());
  }
}

// Qwen3.5's template refuses a chat without a user turn ("No user query found"), so the system
// turn's end is found with an empty user turn after it: past the next turn's header.
TEST(PictureChat, Qwen35MarksTheSystemTurnOfAChat) {
  const Model model = qwen35Chat();
  const ordered_json chat = ordered_json::parse(R"([{"role": "system", "content": "Be brief."},
                                                    {"role": "user", "content": "Hi"}])");
  const ChatTokens tokens = model.chatTokens(chat);
  ASSERT_EQ(tokens.ends.size(), 2u);
  EXPECT_EQ(tokens.head, tokens.ends[0]);
  const std::vector<TokenId> head(tokens.ids.begin(), tokens.ids.begin() + static_cast<std::ptrdiff_t>(tokens.head));
  EXPECT_EQ(model.tokenizer().decode(head), "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n");
  EXPECT_LT(tokens.ends[0], tokens.ends[1]);
}

TEST(PictureChat, PicturesAndPlaceholdersMustAgree) {
  const Model model = qwen35Chat();
  const ordered_json cases = ordered_json::parse(std::ifstream(kVision + "chats.json"));
  std::vector<Picture> none;
  expectError([&] { model.chatTokens(cases[0]["messages"], none); }, {"shows 1 pictures", "0 were given"});
  std::vector<Picture> gridless(1);
  expectError([&] { model.chatTokens(cases[0]["messages"], gridless); }, {"picture 0 has no grid"});
}

}  // namespace
