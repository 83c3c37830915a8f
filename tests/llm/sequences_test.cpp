// gizml::llm::Sequences (giz bench's passes, on the public API): each pass is the model's forward
// pass of the same feeds, to the bit, with the KV cache it was given; and its mistakes.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "llm/language_model.h"
#include "model_reference.h"

namespace {

// The same bits, row for row.
void expectSameBits(const tensor::Tensor& got, const tensor::Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  const std::vector<float> a = got.toFloats(), b = want.toFloats();
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST(Sequences, PassesAreTheModelsForwardPasses) {
  const ConvertedModel& weights = converted("llama", 8);
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(weights, {.kvCache = DType::F16});
  Sequences sequences(weights.folder(), 2, 12, DType::F16);
  ASSERT_EQ(sequences.vocabSize(), model->config().vocabSize);
  const std::unique_ptr<SequenceState> first = model->newState(12), second = model->newState(12);
  // A prefill of two prompts with every row's logits, then decode steps of one token each.
  std::vector<std::vector<TokenId>> tokens = {{1, 5, 9, 2}, {7, 3}};
  std::vector<tensor::Tensor> got = sequences.forward(tokens, true);
  std::vector<tensor::Tensor> want = model->forward({{first.get(), tokens[0], true}, {second.get(), tokens[1], true}});
  ASSERT_EQ(got.size(), 2u);
  expectSameBits(got[0], want[0]);
  expectSameBits(got[1], want[1]);
  EXPECT_EQ(got[0].shape()[0], 4);
  for (TokenId step = 0; step < 3; ++step) {
    tokens = {{step + 10}, {step + 20}};
    got = sequences.forward(tokens);
    want = model->forward({{first.get(), tokens[0]}, {second.get(), tokens[1]}});
    expectSameBits(got[0], want[0]);
    expectSameBits(got[1], want[1]);
    EXPECT_EQ(got[1].shape()[0], 1);
  }
}

// clear() forgets the tokens, not the memory: the same passes again give the same bits, for a KV
// cache and for Qwen 3.5's recurrent states alike.
TEST(Sequences, ClearStartsEverySequenceAfresh) {
  for (const std::string arch : {"llama", "qwen3_5"}) {
    SCOPED_TRACE(arch);
    Sequences sequences(converted(arch, 8).folder(), 2, 8);
    const std::vector<std::vector<TokenId>> prompts = {{1, 5, 9, 2}, {7, 3}}, step = {{4}, {6}};
    const std::vector<tensor::Tensor> firstPrompt = sequences.forward(prompts, true);
    const std::vector<tensor::Tensor> firstStep = sequences.forward(step);
    sequences.clear();
    const std::vector<tensor::Tensor> againPrompt = sequences.forward(prompts, true);
    const std::vector<tensor::Tensor> againStep = sequences.forward(step);
    for (size_t s = 0; s < 2; ++s) {
      expectSameBits(againPrompt[s], firstPrompt[s]);
      expectSameBits(againStep[s], firstStep[s]);
    }
    // Everything was forgotten: the whole capacity is free again.
    sequences.clear();
    EXPECT_EQ(sequences.forward({{1, 2, 3, 4, 5, 6, 7, 8}, {1}})[0].shape()[0], 1);
  }
}

// A pass's logits keep their values while the caller holds them, whatever passes come after; the
// host memory of logits nobody holds any more serves the next passes (a fresh block a pass was
// faulted in page by page: 2 % of a SmolLM2 decode step).
TEST(Sequences, HeldLogitsStayAsTheyWereAndDroppedOnesLendTheirMemory) {
  const ConvertedModel& weights = converted("llama", 8);
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(weights, {});
  const std::unique_ptr<SequenceState> state = model->newState(16);
  std::vector<tensor::Tensor> held;
  std::vector<std::vector<float>> values;
  for (TokenId t = 1; t <= 4; ++t) {
    held.push_back(model->forward({{state.get(), {t}}})[0]);
    values.push_back(held.back().toFloats());
    for (size_t i = 0; i < held.size(); ++i) EXPECT_EQ(held[i].toFloats(), values[i]) << "pass " << i;
  }
  // A caller that reads each pass's logits until the next pass returns, as giz bench and the
  // engine do: two blocks of memory take turns (the same storages, kept alive between passes).
  held.clear();
  tensor::Tensor last = model->forward({{state.get(), {5}}})[0];
  const std::weak_ptr<tensor::Storage> first = last.storage();
  std::set<const tensor::Storage*> storages;
  for (TokenId t = 6; t <= 11; ++t) {
    const std::vector<float> before = last.toFloats();
    tensor::Tensor next = model->forward({{state.get(), {t}}})[0];
    EXPECT_EQ(last.toFloats(), before);
    last = next;
    storages.insert(last.storage().get());
    EXPECT_FALSE(first.expired());
  }
  EXPECT_EQ(storages.size(), 2u);
  EXPECT_EQ(storages.count(first.lock().get()), 1u);
}

TEST(Sequences, MistakesAreErrors) {
  const std::string folder = converted("llama", 8).folder();
  expectError([&] { Sequences(folder, 0, 8); }, {"count must be at least 1"});
  Sequences sequences(folder, 2, 4);
  expectError([&] { sequences.forward({{1, 2}}); }, {"1 lists of tokens for 2 sequences"});
  expectError([&] { sequences.forward({{1, 2, 3}, {1, 2, 3, 4, 5}}); }, {"exceed the state's capacity of 4"});
  expectError([&] { sequences.forward({{1}, {static_cast<TokenId>(sequences.vocabSize())}}); }, {"outside the vocabulary"});
  EXPECT_EQ(sequences.forward({{1, 2, 3, 4}, {1}})[0].shape()[0], 1);  // the failed passes appended nothing
}

}  // namespace
