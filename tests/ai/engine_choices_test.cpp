// The engine's n choices (Engine::add(request, choices)), as the server's `n` runs them: a copied
// KV cache continues exactly as the original, each choice samples its own seed (seed + index),
// and a model whose states do not copy still gives every choice, each reading the prompt itself.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include "llm/fake_model.h"
#include "llm/llm_test_util.h"
#include "llm/model_reference.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

TEST(EngineChoices, ACopiedKvCacheContinuesBitForBitAsTheOriginal) {
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(converted("llama", 8));
  const std::vector<int32_t> prompt = readReference("llama").prompts[2];
  const std::unique_ptr<SequenceState> original = model->newState(64), copy = model->newState(64);
  model->forward({{original.get(), prompt}});
  ASSERT_TRUE(copy->copyFrom(*original));
  EXPECT_EQ(copy->length(), original->length());
  const std::vector<float> a = model->forward({{original.get(), {7}}})[0].toFloats();
  const std::vector<float> b = model->forward({{copy.get(), {7}}})[0].toFloats();
  EXPECT_EQ(a, b);
  // Another capacity is no copy.
  const std::unique_ptr<SequenceState> small = model->newState(32);
  EXPECT_FALSE(small->copyFrom(*original));
  EXPECT_EQ(small->length(), 0);
}

TEST(EngineChoices, ChoicesSampleSeedPlusIndexAndShareThePromptsRead) {
  const std::shared_ptr<LanguageModel> model = buildLanguageModel(converted("llama", 8));
  const std::vector<int32_t> prompt = readReference("llama").prompts[2];
  Engine engine(model, nullptr, {}, 3, 64);
  const std::vector<int> ids = engine.add(request(prompt, 5, sample(1.0, 0, 1.0, 11)), 3);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(engine.freeSlots(), 0);
  EXPECT_THROW(engine.add(request(prompt, 5), 1), Error);
  std::map<int, std::vector<TokenId>> tokens;
  int firstStep = 0;
  for (int step = 0; engine.running() > 0; ++step)
    for (const Progress& p : engine.advance()) {
      tokens[p.request].insert(tokens[p.request].end(), p.tokens.begin(), p.tokens.end());
      if (step == 0) ++firstStep;
    }
  EXPECT_EQ(firstStep, 3);  // all three drew their first token from the one prefill
  for (int i = 0; i < 3; ++i) EXPECT_EQ(tokens[ids[static_cast<size_t>(i)]].size(), 5u);
  // Choice 0 is the request itself, alone.
  Engine alone(model, nullptr, {}, 1, 64);
  EXPECT_EQ(alone.generate({request(prompt, 1, sample(1.0, 0, 1.0, 11))})[0].tokens[0], tokens[ids[0]][0]);
  EXPECT_THROW(engine.add(request(prompt, 5), 0), Error);
}

TEST(EngineChoices, StatesThatDoNotCopyReadThePromptEach) {
  auto model = std::make_shared<fake::FakeModel>(32);
  Engine engine(model, nullptr, {}, 3, 64);
  const std::vector<TokenId> prompt = {1, 2, 3, 4, 5};
  const std::vector<int> ids = engine.add(request(prompt, 4, sample(1.0, 0, 1.0, 3)), 3);
  std::map<int, std::vector<TokenId>> tokens;
  while (engine.running() > 0)
    for (const Progress& p : engine.advance()) tokens[p.request].insert(tokens[p.request].end(), p.tokens.begin(), p.tokens.end());
  // The first pass read the prompt for choice 0; the others read it in the next.
  ASSERT_GE(model->fedTokens.size(), 2u);
  EXPECT_EQ(model->fedTokens[0], std::vector<size_t>({5}));
  EXPECT_EQ(model->fedTokens[1], std::vector<size_t>({1, 5, 5}));
  for (size_t i = 0; i < 3; ++i) {
    Engine alone(std::make_shared<fake::FakeModel>(32), nullptr, {}, 1, 64);
    EXPECT_EQ(tokens[ids[i]], alone.generate({request(prompt, 4, sample(1.0, 0, 1.0, 3 + i))})[0].tokens) << i;
  }
}

}  // namespace
