// The ids of the `tokenizers` package on a varied corpus, id for id, and decoding them back.
#include <gizml/tokenizer.h>
#include <gtest/gtest.h>

#include "tokenizer/fixtures.h"
#include "common/test_paths.h"

namespace {

using gizml::llm::TokenId;
using gizml::llm::Tokenizer;

void expectFixtures(const std::string& name) {
  const Tokenizer t = Tokenizer::fromJson(test_paths::sharedData("/tokenizers/") + name);
  const auto docs = tokenizer_fixtures::readCorpus(test_paths::testData("/tokenizer/corpus.bin"));
  const auto expected = tokenizer_fixtures::readIds(test_paths::testData("/tokenizer/") + name + ".ids");
  ASSERT_EQ(docs.size(), expected.size());
  ASSERT_GE(docs.size(), 150u);
  size_t matched = 0, roundTrips = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    const std::vector<TokenId> ids = t.encode(docs[i], false);
    if (ids == expected[i].ids) {
      ++matched;
    } else {
      size_t k = 0;
      while (k < ids.size() && k < expected[i].ids.size() && ids[k] == expected[i].ids[k]) ++k;
      ADD_FAILURE() << name << " document " << i << " differs at id " << k << " of " << expected[i].ids.size()
                    << " (ours " << (k < ids.size() ? ids[k] : -1) << ", expected "
                    << (k < expected[i].ids.size() ? expected[i].ids[k] : -1) << ")";
    }
    const std::string& text = expected[i].decoded ? *expected[i].decoded : docs[i];
    if (t.decode(expected[i].ids) == text) {
      ++roundTrips;
    } else {
      ADD_FAILURE() << name << " document " << i << " decodes differently";
    }
  }
  EXPECT_EQ(matched, docs.size());
  EXPECT_EQ(roundTrips, docs.size());
}

TEST(TokenizerFixtures, Qwen3) { expectFixtures("qwen3"); }
TEST(TokenizerFixtures, Llama3) { expectFixtures("llama3"); }
TEST(TokenizerFixtures, Gemma3) { expectFixtures("gemma3"); }

}  // namespace
