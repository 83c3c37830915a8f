// What crosses from a GPU each step (llm/engine/device_rows.h): the argmax of a greedy row, the
// candidates of a topK row, the whole row only where sampling needs it; and the step's other
// copies (the embedding rows, the page tables). On the first GPU, in CI the host GPU emulator
// (ctest emulator_test_llm); skipped where there is none.
#include <gizml/grammar.h>
#include <gizml/llm.h>
#include <gizml/netops_rows.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/gpu_checks.h"
#include "llm/engine/device_rows.h"
#include "llm/engine/sampling.h"
#include "llm/language_model.h"
#include "llm_test_util.h"
#include "model_reference.h"
#include "common/test_paths.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

std::shared_ptr<const Tokenizer> qwen3Tokenizer() {
  return std::make_shared<const Tokenizer>(Tokenizer::fromJson(test_paths::sharedData() + "/tokenizers/qwen3"));
}
// An array of 1 to 4 integers, and any JSON object: two grammars whose masks differ.
std::shared_ptr<const gizml::grammar::Grammar> integerArrayGrammar() {
  return std::make_shared<const gizml::grammar::Grammar>(gizml::grammar::Grammar::fromSchema(
      R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 4})"));
}
std::shared_ptr<const gizml::grammar::Grammar> anyObjectGrammar() {
  return std::make_shared<const gizml::grammar::Grammar>(gizml::grammar::Grammar::anyObject());
}

// A model whose logits come back in host memory: the engine then reads every row whole, as it
// did before heads were read on the device. Everything else is the model's own.
class HostLogits final : public LanguageModel {
 public:
  explicit HostLogits(std::shared_ptr<LanguageModel> model) : model_(std::move(model)) {}
  const ModelConfig& config() const override { return model_->config(); }
  std::unique_ptr<SequenceState> newState(int64_t maxTokens) const override { return model_->newState(maxTokens); }
  int64_t pageTokens() const override { return model_->pageTokens(); }
  std::optional<KvFormat> kvFormat() const override { return model_->kvFormat(); }
  std::shared_ptr<StatePool> newPool(int64_t pages, const KvFormat& format, bool inHostMemory) const override {
    return model_->newPool(pages, format, inHostMemory);
  }
  std::unique_ptr<SequenceState> newStateIn(const std::shared_ptr<StatePool>& pool, int64_t maxTokens) const override {
    return model_->newStateIn(pool, maxTokens);
  }
  std::vector<tensor::Tensor> forward(const std::vector<Feed>& feeds) override {
    std::vector<tensor::Tensor> out = model_->forward(feeds);
    for (tensor::Tensor& t : out) t = t.host();
    return out;
  }

 private:
  std::shared_ptr<LanguageModel> model_;
};

class GpuModelSampling : public test::GpuTest {
 protected:
  std::shared_ptr<LanguageModel> llama() {
    return buildLanguageModel(converted("llama", 8), {.kvCache = DType::F32, .gpu = gpu()});
  }
  // The launches and copies up of the first decode step of three requests sampled as `samplings`
  // say, on a model of their own (its first decode step, queued, not recorded).
  std::pair<uint64_t, uint64_t> decodeStepActivity(const std::shared_ptr<const Tokenizer>& tokenizer,
                                                   const std::vector<Sampling>& samplings) {
    Engine engine(llama(), tokenizer, {100}, 3, 64);
    const std::vector<std::vector<TokenId>> prompts = {{5, 9, 2}, {4, 4, 8, 1}, {7, 1, 30}};
    for (size_t i = 0; i < prompts.size(); ++i) engine.add(request(prompts[i], 8, samplings[i]));
    engine.advance();  // the prompts
    const gizhw::gpu::Activity before = gpu().activity();
    engine.advance();
    const gizhw::gpu::Activity after = gpu().activity();
    return {after.launches - before.launches, after.copiesToDevice - before.copiesToDevice};
  }
  // Logits [rows, vocab] on the GPU: a fixed pseudo-random row each, with `top` given values.
  tensor::Tensor logits(int64_t rows, int64_t vocab, const std::vector<std::pair<int64_t, double>>& top) {
    std::vector<double> v(static_cast<size_t>(rows * vocab));
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * static_cast<double>(i) * static_cast<double>(i % 97));
    for (int64_t r = 0; r < rows; ++r)
      for (auto [token, value] : top) v[static_cast<size_t>(r * vocab + token)] = value;
    return on(tensor::tensor({rows, vocab}, v));
  }
};

// Greedy and seeded topK requests (topP and minP on top) on a GPU model draw the tokens that the
// engine draws from whole rows read into host memory.
TEST_F(GpuModelSampling, HeadsOnTheDeviceGiveTheTokensOfWholeRows) {
  const std::shared_ptr<LanguageModel> model = llama();
  const std::shared_ptr<LanguageModel> host = std::make_shared<HostLogits>(model);
  Sampling topP = sample(1.3, 40, 0.8, 11);
  topP.minP = 0.02;
  const std::vector<Request> requests = {request({5, 9, 2, 31, 7, 11, 3}, 10),
                                         request({4, 4, 8, 1, 2, 9, 40, 17, 6}, 10, sample(0.9, 5, 1.0, 3)),
                                         request({7, 1, 30, 2}, 10, topP), request({8, 8, 3}, 10, sample(2.0, 1, 1.0, 5))};
  Engine onDevice(model, nullptr, {}, 4, 64), whole(host, nullptr, {}, 4, 64);
  const std::vector<Result> got = onDevice.generate(requests), want = whole.generate(requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].tokens.size(), 10u) << "request " << i;
  }
}

// Penalties and logit biases (a token biased twice among them) applied to the rows on the GPU
// give the tokens of whole rows penalized on the host, and only the rows' heads cross.
TEST_F(GpuModelSampling, PenaltiesOnTheDeviceGiveTheTokensOfWholeRows) {
  const std::shared_ptr<LanguageModel> model = llama();
  const std::shared_ptr<LanguageModel> host = std::make_shared<HostLogits>(model);
  Sampling greedy = sample(0.0, 0, 1.0, 0);
  greedy.repetitionPenalty = 1.3;
  greedy.presencePenalty = 0.4;
  greedy.frequencyPenalty = 0.3;
  Sampling drawn = sample(1.1, 8, 0.9, 21);
  drawn.frequencyPenalty = 0.7;
  drawn.logitBias = {{3, 2.5f}, {9, -1.0f}, {3, 0.25f}};
  Sampling repeated = sample(0.0, 0, 1.0, 0);
  repeated.repetitionPenalty = 0.6;  // below 1: repeats favoured, the greedy path meets them again
  repeated.logitBias = {{12, -0.5f}};
  const std::vector<Request> requests = {request({5, 9, 2, 31, 7, 11, 3}, 12, greedy),
                                         request({4, 4, 8, 1, 2, 9, 40, 17, 6}, 12, drawn),
                                         request({7, 1, 30, 2, 12}, 12, repeated)};
  Engine onDevice(model, nullptr, {}, 3, 64), whole(host, nullptr, {}, 3, 64);
  const gizhw::gpu::Activity before = gpu().activity();
  const std::vector<Result> got = onDevice.generate(requests);
  const gizhw::gpu::Activity after = gpu().activity();
  const std::vector<Result> want = whole.generate(requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].tokens.size(), 12u) << "request " << i;
  }
  // 12 steps of the three together, each reading heads only: two greedy argmaxes and one row's
  // candidates (a whole row, read where penalties are the host's, is 4 x 512 bytes here).
  EXPECT_EQ(after.bytesToHost - before.bytesToHost, 12u * (4u + 4u + 4u * netops::CANDIDATE_ROW));
}

// The penalties of a step's rows go up in one copy and run in one launch, whatever the number of
// requests that have them: a decode step of three penalized requests takes one launch and one
// copy up more than the same step without penalties.
TEST_F(GpuModelSampling, AStepsPenaltiesTakeOneCopyAndOneLaunch) {
  Sampling penalized = greedy();
  penalized.repetitionPenalty = 1.2;
  penalized.frequencyPenalty = 0.3;
  const auto [plainLaunches, plainCopies] = decodeStepActivity(nullptr, {greedy(), greedy(), greedy()});
  const auto [launches, copies] = decodeStepActivity(nullptr, {penalized, penalized, penalized});
  EXPECT_EQ(launches, plainLaunches + 1);
  EXPECT_EQ(copies, plainCopies + 1);
}

// So do the grammars' masks: three constrained requests (two in one grammar state, one in
// another) add one launch and one copy to a decode step.
TEST_F(GpuModelSampling, AStepsGrammarMasksTakeOneCopyAndOneLaunch) {
  const auto tokenizer = qwen3Tokenizer();
  const auto array = integerArrayGrammar(), object = anyObjectGrammar();
  Sampling inArray = greedy(), inObject = greedy();
  inArray.grammar = array;
  inObject.grammar = object;
  const auto [plainLaunches, plainCopies] = decodeStepActivity(tokenizer, {greedy(), greedy(), greedy()});
  const auto [launches, copies] = decodeStepActivity(tokenizer, {inArray, inArray, inObject});
  EXPECT_EQ(launches, plainLaunches + 1);
  EXPECT_EQ(copies, plainCopies + 1);
}

// A grammar's mask applied to the rows on the GPU (after the penalties) gives the tokens of whole
// rows constrained on the host: greedy, seeded draws, with penalties, and a grammar that starts
// after a token; only the heads cross.
TEST_F(GpuModelSampling, AGrammarsMaskOnTheDeviceGivesTheTokensOfWholeRows) {
  // Qwen3's byte-level vocabulary spells ids 0..93 as the ASCII characters 33..126.
  const auto tokenizer = qwen3Tokenizer();
  const TokenId end = 100;
  const auto array = integerArrayGrammar(), object = anyObjectGrammar();
  const std::shared_ptr<LanguageModel> model = llama();
  const std::shared_ptr<LanguageModel> host = std::make_shared<HostLogits>(model);
  Sampling greedy = sample(0.0, 0, 1.0, 0);
  greedy.grammar = array;
  Sampling drawn = sample(1.2, 8, 0.95, 7);
  drawn.grammar = object;
  Sampling penalized = sample(0.8, 5, 1.0, 4);
  penalized.grammar = array;
  penalized.frequencyPenalty = 0.9;
  penalized.logitBias = {{58, 3.0f}};  // '[': a bias the mask must override where it is not allowed
  Sampling later = sample(0.0, 0, 1.0, 0);
  later.grammar = array;
  later.after = 9;
  const std::vector<Request> requests = {request({5, 9, 2, 31, 7}, 24, greedy), request({4, 4, 8, 1}, 24, drawn),
                                         request({7, 1, 30, 2, 12}, 24, penalized), request({9, 3, 9}, 24, later)};
  Engine onDevice(model, tokenizer, {end}, 4, 64), whole(host, tokenizer, {end}, 4, 64);
  const std::vector<Result> got = onDevice.generate(requests), want = whole.generate(requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].finish, want[i].finish) << "request " << i;
  }
  // The greedy array alone: each step that goes on reads its argmax (4 bytes) and nothing else
  // (in an engine of its own: parking a finished chat moves its pages to host memory).
  Engine alone(model, tokenizer, {end}, 1, 64);
  alone.add(requests[0]);
  std::vector<TokenId> tokens;
  for (bool running = true; running;) {
    const gizhw::gpu::Activity before = gpu().activity();
    const std::vector<Progress> progress = alone.advance();
    const gizhw::gpu::Activity after = gpu().activity();
    ASSERT_EQ(progress.size(), 1u);
    tokens.insert(tokens.end(), progress[0].tokens.begin(), progress[0].tokens.end());
    running = progress[0].finish == Finish::Running;
    if (running) {
      EXPECT_EQ(after.bytesToHost - before.bytesToHost, 4u) << "step " << tokens.size();
    }
  }
  EXPECT_EQ(tokens, want[0].tokens);
  if (want[0].finish == Finish::EndOfTurn) {
    const std::string text = tokenizer->decode(std::vector<TokenId>(tokens.begin(), tokens.end() - 1));
    EXPECT_TRUE(nlohmann::json::parse(text).is_array()) << text;
  }
}

// Heads read from the candidates are the row's own to the bit (ties to the lower id); where a
// thread of the candidates kernel may have dropped one of the topK, the rows are read whole.
TEST_F(GpuModelSampling, HeadsFromCandidatesAreExactOrTheRowIsReadWhole) {
  constexpr int64_t vocab = 2048;
  // Tokens 0, 256, ..., 1024 (all read by thread 0, which keeps 4) the highest; 7 ties 1024.
  const tensor::Tensor l = logits(2, vocab, {{0, 9}, {256, 8}, {512, 7}, {768, 6}, {1024, 5}, {7, 5}});
  const std::vector<float> rows = l.toFloats();
  const auto hostHead = [&](int64_t r, size_t k) {
    return headOf(std::span<const float>(rows).subspan(static_cast<size_t>(r * vocab), vocab), k);
  };
  const std::vector<ReadRows> four = readRows({l}, {true}, {4});
  ASSERT_EQ(four[0].heads.size(), 2u);
  EXPECT_TRUE(four[0].values.empty());
  for (int64_t r = 0; r < 2; ++r) EXPECT_EQ(four[0].heads[static_cast<size_t>(r)], hostHead(r, 4));
  const std::vector<ReadRows> five = readRows({l}, {true}, {5});  // token 1024 was dropped
  EXPECT_TRUE(five[0].heads.empty());
  EXPECT_EQ(std::vector<float>(five[0].values.begin(), five[0].values.end()), rows);
  const std::vector<ReadRows> greedy = readRows({l}, {true}, {1});
  ASSERT_EQ(greedy[0].heads.size(), 2u);
  EXPECT_EQ(greedy[0].heads[1][0].first, 0);
  // Two feeds in one tensor, one after the other: one launch and one copy read both.
  const gizhw::gpu::Activity before = gpu().activity();
  const std::vector<ReadRows> two = readRows({l.slice(0, 0, 1), l.slice(0, 1, 2)}, {true, true}, {3, 2});
  const gizhw::gpu::Activity after = gpu().activity();
  EXPECT_EQ(after.launches - before.launches, 1u);
  EXPECT_EQ(after.copiesToHost - before.copiesToHost, 1u);
  EXPECT_EQ(two[0].heads[0], hostHead(0, 3));
  EXPECT_EQ(two[1].heads[0], hostHead(1, 2));
}

// A decode step's copies: the embedding rows and the output rows' ids up, the argmax (4 bytes)
// and the candidates down, and no page table while no sequence takes a page.
TEST_F(GpuModelSampling, ADecodeStepCopiesOnlyWhatItNeeds) {
  const std::shared_ptr<LanguageModel> model = llama();
  Engine engine(model, nullptr, {}, 2, 64);
  engine.add(request({5, 9, 2, 31, 7}, 8));
  engine.add(request({4, 4, 8, 1}, 8, sample(0.9, 5, 1.0, 3)));
  engine.advance();  // the prompts: each sequence's page table goes up once
  const gizhw::gpu::Activity before = gpu().activity();
  engine.advance();
  const gizhw::gpu::Activity after = gpu().activity();
  std::printf("a decode step of 2 rows: %llu launches, %llu copies up (%llu bytes), %llu down (%llu bytes)\n",
              static_cast<unsigned long long>(after.launches - before.launches),
              static_cast<unsigned long long>(after.copiesToDevice - before.copiesToDevice),
              static_cast<unsigned long long>(after.bytesToDevice - before.bytesToDevice),
              static_cast<unsigned long long>(after.copiesToHost - before.copiesToHost),
              static_cast<unsigned long long>(after.bytesToHost - before.bytesToHost));
  EXPECT_EQ(after.copiesToHost - before.copiesToHost, 2u);
  EXPECT_EQ(after.bytesToHost - before.bytesToHost, 4u + 4u * netops::CANDIDATE_ROW);
  const int64_t hidden = model->config().hiddenSize;
  // Up: the embedding rows, the rows' RoPE positions (4 bytes each), their places for the KV
  // store and attention (a page table's address and a position each: 12 bytes), and the ids of
  // the rows whose logits are read (8 bytes each, gatherRows'). The page tables go up only when
  // a sequence takes a page.
  EXPECT_EQ(after.copiesToDevice - before.copiesToDevice, 4u);
  EXPECT_EQ(after.bytesToDevice - before.bytesToDevice, static_cast<uint64_t>(2 * hidden * 4 + 2 * 4 + 2 * 12 + 2 * 8));
}

}  // namespace
