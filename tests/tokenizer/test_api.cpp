// Special tokens, encode(addSpecial), the streaming decoder and malformed GGUF vocabularies.
#include <gizml/error.h>
#include <gizml/tokenizer.h>
#include <gtest/gtest.h>

#include <cstring>

#include "llm/formats/gguf.h"
#include "llm/tokenizer/load_gguf.h"
#include "llm/tokenizer/unicode.h"
#include "common/test_paths.h"

namespace {

using gizml::llm::StreamDecoder;
using gizml::llm::TokenId;
using gizml::llm::Tokenizer;

const Tokenizer& qwen3() {
  static const Tokenizer t = Tokenizer::fromJson(test_paths::sharedData("/tokenizers/qwen3/tokenizer.json"));
  return t;
}

TEST(TokenizerApi, SpecialTokensAndLookups) {
  const Tokenizer& t = qwen3();
  const std::vector<TokenId> ids = t.encode("<|im_start|>user\nHi<|im_end|>");
  EXPECT_EQ(ids.front(), t.tokenToId("<|im_start|>"));
  EXPECT_EQ(ids.back(), t.eos());
  EXPECT_EQ(t.idToToken(ids.back()), "<|im_end|>");
  EXPECT_TRUE(t.isSpecial(ids.back()));
  EXPECT_EQ(t.bos(), -1);
  EXPECT_EQ(t.decode(ids, true), "user\nHi");
  EXPECT_EQ(t.tokenToId("no such token"), -1);
  EXPECT_THROW(t.idToToken(-1), gizml::Error);
  EXPECT_THROW(t.decode(std::vector<TokenId>{1 << 30}), gizml::Error);
}

TEST(TokenizerApi, StreamDecoderHoldsBackPartialCharacters) {
  const Tokenizer& t = qwen3();
  const std::string text = "naïve 😀 emoji, 中文, and <think>x</think> 👩‍💻!";
  const std::vector<TokenId> ids = t.encode(text, false);
  StreamDecoder stream(t);
  std::string joined;
  for (TokenId id : ids) {
    const std::string chunk = stream.push(id);
    EXPECT_EQ(gizml::llm::unicode::toValidUtf8(chunk), chunk) << "a broken character was emitted";
    joined += chunk;
  }
  joined += stream.flush();
  EXPECT_EQ(joined, text);
  // A lone byte token (the first byte of 😀) is held back, then flushed as U+FFFD.
  StreamDecoder partial(t);
  const TokenId firstByte = t.tokenToId("ð");
  ASSERT_GE(firstByte, 0);
  EXPECT_EQ(partial.push(firstByte), "");
  EXPECT_EQ(partial.flush(), "\xEF\xBF\xBD");
}

TEST(TokenizerApi, GemmaAddsBos) {
  const Tokenizer t = Tokenizer::fromJson(test_paths::sharedData("/tokenizers/gemma3"));
  EXPECT_EQ(t.bos(), 2);
  EXPECT_EQ(t.eos(), t.tokenToId("<end_of_turn>"));
  const std::vector<TokenId> ids = t.encode("Hello world");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 2);
  EXPECT_EQ(t.decode(ids, true), "Hello world");
}

TEST(TokenizerApi, SpmStreamDropsTheAddedSpace) {
  const Tokenizer t = Tokenizer::fromGguf(test_paths::sharedData("/tokenizer-tests/llama-spm.gguf"));
  const std::string text = "Hello world 🦙 ok";
  const std::vector<TokenId> ids = t.encode(text);
  EXPECT_EQ(t.decode(ids, true), text);
  StreamDecoder stream(t, true);
  std::string joined;
  for (TokenId id : ids) joined += stream.push(id);
  EXPECT_EQ(joined + stream.flush(), text);
}

TEST(TokenizerApi, MalformedGgufIsAnError) {
  const uint8_t header[] = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
                            // key: length 2^40 (far past the end)
                            0, 0, 0, 0, 0, 1, 0, 0};
  const auto open = [](const uint8_t* bytes, size_t size) {
    return gizml::llm::GgufFile(std::vector<uint8_t>(bytes, bytes + size), "test");
  };
  EXPECT_THROW(open(header, sizeof header), gizml::Error);
  EXPECT_THROW(open(header, 3), gizml::Error);
  EXPECT_THROW(open(header, 24), gizml::Error);  // a pair is missing
  // A well-formed GGUF file without a vocabulary.
  EXPECT_THROW(Tokenizer::fromGguf(test_paths::testData("/gguf/writer.gguf")), gizml::Error);
  // Metadata of the wrong type names the key.
  const uint8_t wrongType[] = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
                               21, 0, 0, 0, 0, 0, 0, 0, 't', 'o', 'k', 'e', 'n', 'i', 'z', 'e', 'r', '.', 'g',
                               'g', 'm', 'l', '.', 't', 'o', 'k', 'e', 'n', 's', 4, 0, 0, 0, 7, 0, 0, 0};
  try {
    gizml::llm::loadGgufTokenizer(open(wrongType, sizeof wrongType));
    ADD_FAILURE() << "no error";
  } catch (const gizml::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.tokens"), std::string::npos) << e.what();
  }
}

}  // namespace

namespace {

TEST(TokenizerApi, InvalidUtf8BecomesReplacementCharacters) {
  using gizml::llm::unicode::toValidUtf8;
  EXPECT_EQ(toValidUtf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(toValidUtf8("\xF0\x9F\x98"), "\xEF\xBF\xBD");  // one maximal subpart
  EXPECT_EQ(toValidUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  const Tokenizer& t = qwen3();
  EXPECT_EQ(t.decode(t.encode("\xFF\x8D\xCF", false)), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
