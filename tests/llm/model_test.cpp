// Model: chat prompts and tokens with real templates and tokenizers, end-of-turn tokens, and the
// tokenizer of a folder converted from a GGUF file.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "fake_model.h"
#include "llm/formats/gguf.h"
#include "llm_test_util.h"
#include "common/test_paths.h"

using namespace gizml::llm;
using nlohmann::ordered_json;

namespace {

std::string shared(const std::string& name) { return test_paths::sharedData() + "/" + name; }

Model modelOf(const std::string& tokenizerName) {
  const std::string folder = shared("tokenizers/" + tokenizerName);
  std::ifstream in(folder + "/tokenizer_config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  auto tokenizer = std::make_shared<const Tokenizer>(Tokenizer::fromJson(folder));
  auto fake = std::make_shared<fake::FakeModel>(static_cast<int64_t>(tokenizer->vocabSize()));
  return Model(fake, tokenizer, config.value("chat_template", ""));
}

const ordered_json kChat = ordered_json::parse(R"([
  {"role": "user", "content": "Name three rivers."},
  {"role": "assistant", "content": "Nile, Amazon, Danube."},
  {"role": "user", "content": "And three lakes?"}])");

}  // namespace

TEST(Model, Qwen3ChatPromptWithAndWithoutThinking) {
  const Model m = modelOf("qwen3");
  const ordered_json one = ordered_json::array({kChat[0]});
  EXPECT_EQ(m.chatPrompt(one, true), "<|im_start|>user\nName three rivers.<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(m.chatPrompt(one, false),
            "<|im_start|>user\nName three rivers.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  const std::vector<TokenId>& ends = m.endOfTurn();
  EXPECT_NE(std::find(ends.begin(), ends.end(), m.tokenizer().tokenToId("<|im_end|>")), ends.end());
}

TEST(Model, ChatTokensMarkWhereEachMessageEnds) {
  const Model m = modelOf("gemma3");
  const ChatTokens chat = m.chatTokens(kChat);
  EXPECT_EQ(chat.ids, m.tokenizer().encode(m.chatPrompt(kChat), false));
  ASSERT_EQ(chat.ends.size(), 3u);
  EXPECT_LT(chat.ends[2], chat.ids.size());  // the generation prompt follows
  for (size_t end : chat.ends)
    EXPECT_EQ(m.tokenizer().decode(std::span(chat.ids).subspan(end - 2, 2)), "<end_of_turn>\n");
}

// Qwen3 writes an empty reasoning block into the last assistant message only, so the renders
// of the first two messages and of all three part inside the assistant's turn: its mark stops
// there (what a slot holding the shorter chat can keep).
TEST(Model, ChatTokensStopWhereTheTemplateRewritesATurn) {
  const Model m = modelOf("qwen3");
  const ChatTokens chat = m.chatTokens(kChat, true);
  ASSERT_EQ(chat.ends.size(), 3u);
  const auto text = [&](size_t from, size_t to) { return m.tokenizer().decode(std::span(chat.ids).subspan(from, to - from)); };
  EXPECT_EQ(text(0, chat.ends[0]), "<|im_start|>user\nName three rivers.<|im_end|>\n");
  EXPECT_EQ(text(chat.ends[0], chat.ends[1]), "<|im_start|>assistant\n");
  EXPECT_EQ(text(chat.ends[1], chat.ends[2]), "Nile, Amazon, Danube.<|im_end|>\n<|im_start|>user\nAnd three lakes?<|im_end|>\n");
}

// The head is the system turn (with the tools the template writes there); a chat without one
// has none.
TEST(Model, ChatTokensMarkTheSystemTurnWithItsToolsAsTheHead) {
  const Model m = modelOf("qwen3");
  const ordered_json tools = ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}])");
  ordered_json chat = kChat;
  chat.insert(chat.begin(), ordered_json{{"role", "system"}, {"content", "Be brief."}});
  const ChatTokens with = m.chatTokens(chat, tools, {{"enable_thinking", false}});
  ASSERT_EQ(with.head, with.ends[0]);
  const std::string head = m.tokenizer().decode(std::span(with.ids).first(with.head));
  EXPECT_EQ(head.rfind("<|im_start|>system\nBe brief.", 0), 0u) << head;
  EXPECT_NE(head.find("get_time"), std::string::npos) << head;
  EXPECT_TRUE(head.ends_with("<|im_end|>\n")) << head;
  EXPECT_EQ(m.chatTokens(kChat).head, 0u);
}

TEST(Model, GemmaEndsTurnsWithEndOfTurnAndStartsWithBos) {
  const Model m = modelOf("gemma3");
  const ChatTokens chat = m.chatTokens(ordered_json::array({kChat[0]}));
  EXPECT_EQ(chat.ids.front(), m.tokenizer().bos());
  const std::vector<TokenId>& ends = m.endOfTurn();
  EXPECT_NE(std::find(ends.begin(), ends.end(), m.tokenizer().tokenToId("<end_of_turn>")), ends.end());
  EXPECT_EQ(m.tokenizer().decode(chat.ids), "<bos><start_of_turn>user\nName three rivers.<end_of_turn>\n<start_of_turn>model\n");
}

TEST(Model, EngineRunsOnTheModel) {
  const Model m = modelOf("qwen3");
  Engine e = m.engine(2, 128);
  Request r;
  r.prompt = m.chatTokens(ordered_json::array({kChat[0]})).ids;
  r.limit = 4;
  const Result out = e.generate({r})[0];
  EXPECT_EQ(out.tokens.size(), 4u);
  EXPECT_EQ(out.finish, Finish::Length);
}

TEST(Model, WithoutATemplateChatPromptIsAnError) {
  auto tokenizer = std::make_shared<const Tokenizer>(Tokenizer::fromJson(shared("tokenizers/qwen3")));
  const Model m(std::make_shared<fake::FakeModel>(), tokenizer, "");
  expectError([&] { m.chatPrompt(kChat); }, {"no chat template"});
}

TEST(Model, LoadNamesAMissingFolder) {
  expectError([] { load("/nonexistent/model"); }, {"/nonexistent/model"});
}

// A folder converted from a GGUF file holds tokenizer_gguf.json (the tokenizer.ggml.* keys);
// written here from the GGUF's own metadata, it must tokenize as the GGUF does.
TEST(Model, TokenizerOfAGgufConversion) {
  const std::string gguf = shared("tokenizer-tests/llama-spm.gguf");
  const GgufFile file(gguf);
  nlohmann::json doc = {{"model", file.getString("tokenizer.ggml.model")},
                        {"tokens", file.getStrings("tokenizer.ggml.tokens")},
                        {"scores", file.getFloats("tokenizer.ggml.scores")},
                        {"token_type", file.getInts("tokenizer.ggml.token_type")},
                        {"bos_token_id", file.getInt("tokenizer.ggml.bos_token_id")},
                        {"eos_token_id", file.getInt("tokenizer.ggml.eos_token_id")}};
  const std::string folder = freshFolder("gguf_tokenizer");
  std::ofstream(folder + "/tokenizer_gguf.json") << doc.dump();
  const Tokenizer fromJson = Tokenizer::fromJson(folder);
  const Tokenizer fromGguf = Tokenizer::fromGguf(gguf);
  EXPECT_EQ(fromJson.vocabSize(), fromGguf.vocabSize());
  EXPECT_EQ(fromJson.bos(), fromGguf.bos());
  for (const char* text : {"Hello world", " leading space", "ünïcödé 🙂 text", "\n\ttabs"})
    EXPECT_EQ(fromJson.encode(text), fromGguf.encode(text)) << text;
}
