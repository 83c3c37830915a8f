// The engine on a fake model: batching, prefix reuse, stops, cancel and bad input.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/expect_error.h"
#include "fake_model.h"
#include "llm_test_util.h"
#include "common/test_paths.h"

using namespace gizml::llm;
using gizml::llm::fake::FakeModel;
using gizml::llm::fake::fakeLogits;
using gizml::llm::fake::greedyReference;

namespace {

struct EngineTest : ::testing::Test {
  std::shared_ptr<FakeModel> model = std::make_shared<FakeModel>();
  Engine engine{model, nullptr, {}, 3, 64};
};


}  // namespace

TEST_F(EngineTest, GreedyBatchEqualsEachAloneInOnePassPerStep) {
  const std::vector<Request> requests = {request({1, 2, 3}, 10), request({7}, 4), request({5, 5}, 7)};
  const std::vector<Result> results = engine.generate(requests);
  ASSERT_EQ(results.size(), 3u);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(results[i].tokens, greedyReference(requests[i].prompt, requests[i].limit)) << i;
    EXPECT_EQ(results[i].finish, Finish::Length);
  }
  // Prefill of all three in the first pass, then one token per running sequence.
  EXPECT_EQ(model->passes, 10);
  EXPECT_EQ(model->fedTokens[0], (std::vector<size_t>{3, 1, 2}));
  EXPECT_EQ(model->fedTokens[1], (std::vector<size_t>{1, 1, 1}));
  EXPECT_EQ(model->fedTokens[5], (std::vector<size_t>{1, 1}));
}

TEST_F(EngineTest, MoreRequestsThanSlotsWaitForAFreeSlot) {
  std::vector<Request> requests;
  for (TokenId t = 0; t < 7; ++t) requests.push_back(request({t, 3}, 3 + t % 3));
  const std::vector<Result> results = engine.generate(requests);
  for (size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(results[i].tokens, greedyReference(requests[i].prompt, requests[i].limit)) << i;
  EXPECT_EQ(engine.running(), 0);
}

TEST_F(EngineTest, EndOfTurnTokenEndsTheRequest) {
  const std::vector<TokenId> free = greedyReference({4}, 20);
  const TokenId end = free[5];
  const size_t first = static_cast<size_t>(std::find(free.begin(), free.end(), end) - free.begin());
  Engine withEnd(model, nullptr, {end}, 1, 64);
  const Result r = withEnd.generate({request({4}, 20)})[0];
  EXPECT_EQ(r.finish, Finish::EndOfTurn);
  EXPECT_EQ(r.tokens, std::vector<TokenId>(free.begin(), free.begin() + static_cast<std::ptrdiff_t>(first) + 1));
}

TEST_F(EngineTest, StopStringOnDecodedText) {
  // Qwen3's byte-level vocabulary spells ids 0..31 as the ASCII characters 33..64.
  auto tokenizer = std::make_shared<const Tokenizer>(Tokenizer::fromJson(test_paths::sharedData() + "/tokenizers/qwen3"));
  const std::vector<TokenId> free = greedyReference({9, 1}, 12);
  std::string text = tokenizer->decode(free);
  const std::string stop = text.substr(3, 2);  // spans tokens 3 and 4
  Engine withStop(model, tokenizer, {}, 1, 64);
  Request r = request({9, 1}, 12);
  r.stop = {"never there", stop};
  const Result result = withStop.generate({r})[0];
  EXPECT_EQ(result.finish, Finish::Stop);
  EXPECT_EQ(tokenizer->decode(result.tokens), text.substr(0, text.find(stop) + stop.size()));
  // The text is cut before the stop string, and no step gave the stop's first character before
  // the step that completed it (it could still have been a stop).
  EXPECT_EQ(result.text, text.substr(0, text.find(stop)));
  withStop.add(r);
  std::string sent;
  for (;;) {
    const std::vector<Progress> steps = withStop.advance();
    ASSERT_EQ(steps.size(), 1u);
    sent += steps[0].text;
    if (steps[0].finish != Finish::Running) break;
    EXPECT_EQ(sent.find(stop.substr(0, 1), text.find(stop)), std::string::npos) << sent;
  }
  EXPECT_EQ(sent, result.text);
}

TEST_F(EngineTest, TextOfARequestWithNoStopIsItsTokensDecoded) {
  auto tokenizer = std::make_shared<const Tokenizer>(Tokenizer::fromJson(test_paths::sharedData() + "/tokenizers/qwen3"));
  Engine withText(model, tokenizer, {}, 2, 64);
  Request r = request({9, 1}, 12);
  r.stop = {"not in this text"};
  const std::vector<Result> results = withText.generate({request({9, 1}, 12), r});
  for (const Result& result : results) {
    EXPECT_EQ(result.finish, Finish::Length);
    EXPECT_EQ(result.text, tokenizer->decode(result.tokens));
  }
}

TEST_F(EngineTest, SeededSamplingIsTheSameAloneAndInABatch) {
  const Sampling s = sample(0.9, 10, 0.95, 1234);
  const std::vector<TokenId> alone = engine.generate({request({3, 1}, 16, s)})[0].tokens;
  const std::vector<Result> batch = engine.generate({request({8}, 9), request({3, 1}, 16, s), request({3, 1}, 16, sample(0.9, 10, 0.95, 99))});
  EXPECT_EQ(batch[1].tokens, alone);
  EXPECT_NE(batch[2].tokens, alone);  // another seed; 16 tokens agree by chance only rarely
}

TEST_F(EngineTest, LogprobsComeWithEachToken) {
  Request r = request({2}, 5);
  r.sampling.logprobs = 3;
  const Result result = engine.generate({r})[0];
  ASSERT_EQ(result.logprobs.size(), 5u);
  std::vector<TokenId> seq = {2};
  for (size_t i = 0; i < 5; ++i) {
    const std::vector<float> row = fakeLogits(seq, 32);
    double z = 0;
    for (float l : row) z += std::exp(l);
    const TokenLogprob& lp = result.logprobs[i];
    EXPECT_EQ(lp.token, result.tokens[i]);
    EXPECT_NEAR(lp.logprob, row[static_cast<size_t>(lp.token)] - std::log(z), 1e-5);
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_EQ(lp.top[0].first, lp.token);  // greedy takes the most likely
    EXPECT_GE(lp.top[0].second, lp.top[1].second);
    EXPECT_GE(lp.top[1].second, lp.top[2].second);
    seq.push_back(result.tokens[i]);
  }
}

TEST_F(EngineTest, NextTurnReadsOnlyWhatTheSlotLacks) {
  const Result first = engine.generate({request({1, 2, 3, 4}, 5)})[0];
  std::vector<TokenId> next = {1, 2, 3, 4};
  next.insert(next.end(), first.tokens.begin(), first.tokens.end());
  next.insert(next.end(), {6, 7});
  model->fedTokens.clear();
  const Result second = engine.generate({request(next, 3)})[0];
  // The slot holds the prompt and all but the last generated token.
  EXPECT_EQ(model->fedTokens[0], (std::vector<size_t>{3}));
  EXPECT_EQ(second.tokens, greedyReference(next, 3));
  // The same prompt again reads its last token only.
  model->fedTokens.clear();
  EXPECT_EQ(engine.generate({request(next, 3)})[0].tokens, second.tokens);
  EXPECT_EQ(model->fedTokens[0], (std::vector<size_t>{1}));
}

TEST_F(EngineTest, AddAdvanceCancel) {
  const int a = engine.add(request({1}, 100));
  const int b = engine.add(request({2}, 2));
  std::vector<Progress> p = engine.advance();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].request, a);
  EXPECT_EQ(p[1].request, b);
  p = engine.advance();
  EXPECT_EQ(p[1].finish, Finish::Length);
  EXPECT_EQ(engine.running(), 1);
  engine.cancel(a);
  engine.cancel(12345);  // unknown: ignored
  EXPECT_EQ(engine.running(), 0);
  EXPECT_TRUE(engine.advance().empty());
}

TEST_F(EngineTest, ContextFullEndsWithLength) {
  Engine small(model, nullptr, {}, 1, 6);
  const Result r = small.generate({request({1, 2, 3, 4}, 50)})[0];
  EXPECT_EQ(r.finish, Finish::Length);
  EXPECT_EQ(r.tokens, greedyReference({1, 2, 3, 4}, 3));  // 4 + 2 fed tokens fill 6
}

TEST_F(EngineTest, BadRequestsThrowAndTheEngineGoesOn) {
  const auto bad = [&](Request r, std::initializer_list<std::string> words) {
    expectError([&] { engine.generate({request({1}, 2), r}); }, words);
    expectError([&] { engine.add(r); }, words);
  };
  bad(request({}, 5), {"prompt is empty"});
  bad(request(std::vector<TokenId>(65, 1), 5), {"65 tokens exceed", "64-token context"});
  bad(request({1, 40}, 5), {"token 40", "vocabulary of 32"});
  bad(request({1}, 0), {"limit 0"});
  bad(request({1}, 5, sample(-0.5)), {"temperature"});
  bad(request({1}, 5, sample(1.0, 0, 1.5)), {"topP"});
  bad(request({1}, 5, sample(1.0, 0, 0.0)), {"topP"});
  bad(request({1}, 5, sample(1.0, -2)), {"topK"});
  Request stop = request({1}, 5);
  stop.stop = {"x"};
  bad(stop, {"stop strings need the engine's tokenizer"});
  EXPECT_EQ(engine.running(), 0);

  for (int i = 0; i < 3; ++i) engine.add(request({1}, 5));
  expectError([&] { engine.add(request({1}, 5)); }, {"all 3 slots are busy"});
  while (engine.running() > 0) engine.advance();
  EXPECT_EQ(engine.generate({request({1}, 4)})[0].tokens, greedyReference({1}, 4));
}

TEST_F(EngineTest, AFailedPassEndsItsRequestsOnly) {
  engine.add(request({1, 2}, 5));
  model->failNext = true;
  expectError([&] { engine.advance(); }, {"forward failed"});
  EXPECT_EQ(engine.running(), 0);
  EXPECT_EQ(engine.generate({request({1, 2}, 5)})[0].tokens, greedyReference({1, 2}, 5));
}

namespace {

// Greedy decoding under a grammar, computed without the engine: at each step the argmax of the
// tokens whose bytes the matcher accepts (the end of the turn once the text is whole).
std::vector<TokenId> grammarReference(std::vector<TokenId> seq, int64_t limit, int64_t vocab, const Tokenizer& t,
                                      const gizml::grammar::Grammar& g, TokenId end) {
  gizml::grammar::Matcher m(g);
  std::vector<TokenId> out;
  while (static_cast<int64_t>(out.size()) < limit) {
    const std::vector<float> row = fakeLogits(seq, vocab);
    TokenId best = -1;
    for (TokenId id = 0; id < vocab; ++id) {
      const bool ok = id == end ? m.complete() : !t.isSpecial(id) && m.accepts(t.pieceBytes(id));
      if (ok && (best < 0 || row[static_cast<size_t>(id)] > row[static_cast<size_t>(best)])) best = id;
    }
    out.push_back(best);
    seq.push_back(best);
    if (best == end) break;
    m.advance(t.pieceBytes(best));
  }
  return out;
}

}  // namespace

TEST(EngineGrammar, GreedyFollowsTheGrammarAndEndsTheTurnWhenWhole) {
  // Qwen3's byte-level vocabulary spells ids 0..93 as the ASCII characters 33..126.
  auto tokenizer = std::make_shared<const Tokenizer>(Tokenizer::fromJson(test_paths::sharedData() + "/tokenizers/qwen3"));
  auto model = std::make_shared<FakeModel>(128);
  const TokenId end = 100;
  auto grammar = std::make_shared<const gizml::grammar::Grammar>(gizml::grammar::Grammar::fromSchema(
      R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})"));
  Engine engine(model, tokenizer, {end}, 2, 128);
  for (const std::vector<TokenId>& prompt : {std::vector<TokenId>{4}, std::vector<TokenId>{58, 17}}) {
    Request r = request(prompt, 80);
    r.sampling.grammar = grammar;
    const Result result = engine.generate({r})[0];
    EXPECT_EQ(result.tokens, grammarReference(prompt, 80, 128, *tokenizer, *grammar, end));
    ASSERT_EQ(result.finish, Finish::EndOfTurn);
    const std::string text = tokenizer->decode(std::vector<TokenId>(result.tokens.begin(), result.tokens.end() - 1));
    const auto value = nlohmann::json::parse(text);  // the reference parser
    ASSERT_TRUE(value.is_array()) << text;
    EXPECT_GE(value.size(), 1u);
    EXPECT_LE(value.size(), 3u);
    for (const auto& v : value) EXPECT_TRUE(v.is_number_integer()) << text;
  }
}

TEST(EngineGrammar, SampledTextIsWholeAndTheGrammarStartsAfterItsToken) {
  auto tokenizer = std::make_shared<const Tokenizer>(Tokenizer::fromJson(test_paths::sharedData() + "/tokenizers/qwen3"));
  auto model = std::make_shared<FakeModel>(128);
  const TokenId end = 100;
  auto grammar = std::make_shared<const gizml::grammar::Grammar>(gizml::grammar::Grammar::anyObject());
  Engine engine(model, tokenizer, {end}, 2, 256);
  int whole = 0;
  for (uint64_t seed : {1, 2, 3}) {
    Request r = request({7}, 200);
    r.sampling = sample(1.0, 0, 1.0, seed);
    r.sampling.grammar = grammar;
    const Result result = engine.generate({r})[0];
    if (result.finish != Finish::EndOfTurn) continue;  // a long object may meet the limit
    ++whole;
    const std::string text = tokenizer->decode(std::vector<TokenId>(result.tokens.begin(), result.tokens.end() - 1));
    EXPECT_TRUE(nlohmann::json::parse(text).is_object()) << text;
  }
  EXPECT_GE(whole, 1);
  // Free until the first `after` token, then constrained.
  const std::vector<TokenId> free = greedyReference({4}, 12, {}, 128);
  Request r = request({4}, 60);
  r.sampling.grammar = std::make_shared<const gizml::grammar::Grammar>(
      gizml::grammar::Grammar::fromSchema(R"({"type": "array", "items": {"type": "integer"}, "maxItems": 2})"));
  r.sampling.after = free[2];
  const Result result = engine.generate({r})[0];
  ASSERT_GT(result.tokens.size(), 3u);
  const size_t at = static_cast<size_t>(std::find(free.begin(), free.end(), free[2]) - free.begin());
  EXPECT_EQ(std::vector<TokenId>(result.tokens.begin(), result.tokens.begin() + static_cast<std::ptrdiff_t>(at) + 1),
            std::vector<TokenId>(free.begin(), free.begin() + static_cast<std::ptrdiff_t>(at) + 1));
  ASSERT_EQ(result.finish, Finish::EndOfTurn);
  const std::string rest = tokenizer->decode(
      std::vector<TokenId>(result.tokens.begin() + static_cast<std::ptrdiff_t>(at) + 1, result.tokens.end() - 1));
  EXPECT_TRUE(nlohmann::json::parse(rest).is_array()) << rest;
}

TEST(EngineGrammar, AGrammarNeedsTheTokenizer) {
  Engine engine(std::make_shared<FakeModel>(), nullptr, {}, 1, 64);
  Request r = request({4}, 5);
  r.sampling.grammar = std::make_shared<const gizml::grammar::Grammar>(gizml::grammar::Grammar::anyObject());
  expectError([&] { engine.generate({r}); }, {"grammar", "tokenizer"});
}
