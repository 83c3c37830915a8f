// Qwen 3.5's MTP drafts in the engine: the tiny Qwen 3.5 fixture with an MTP layer added (random,
// or built to agree with the model: mtp_fixture.h), greedy tokens the same with and without
// drafts, sampled tokens from the same distribution, and the state rolled back to the last
// accepted draft.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "llm/engine/sampling.h"
#include "llm/formats/safetensors.h"
#include "llm_test_util.h"
#include "model_reference.h"
#include "mtp_fixture.h"

namespace {


/// The qwen3_5 fixture with an MTP layer (mtp_fixture.h), converted unquantized.
std::shared_ptr<LanguageModel> modelWithMtp(bool agreeing) {
  const std::string hf = freshFolder(agreeing ? "agreeing_hf" : "random_hf");
  writeQwen35WithMtp(modelData("qwen3_5"), hf, agreeing);
  const std::string out = freshFolder(agreeing ? "agreeing" : "random");
  convert(hf, out, Bits{.layers = 8, .head = 8, .group = 256});
  return buildLanguageModel(ConvertedModel::open(out));
}


std::vector<Result> run(const std::shared_ptr<LanguageModel>& model, int drafts, const std::vector<Request>& requests) {
  Engine engine(model, nullptr, {}, 2, 128);
  engine.setDrafts(drafts);
  return engine.generate(requests);
}

TEST(Qwen35Mtp, GreedyTokensAreTheSameWithAndWithoutDrafts) {
  const Reference ref = readReference("qwen3_5");
  for (bool agreeing : {false, true}) {
    const std::shared_ptr<LanguageModel> model = modelWithMtp(agreeing);
    ASSERT_TRUE(model->drafts());
    const std::vector<Request> requests = {request(ref.prompts[1], 60), request(ref.prompts[2], 50)};
    const std::vector<Result> plain = run(model, 0, requests);
    for (int drafts : {1, 3}) {
      const std::vector<Result> drafted = run(model, drafts, requests);
      for (size_t i = 0; i < requests.size(); ++i) {
        EXPECT_EQ(drafted[i].tokens, plain[i].tokens) << "request " << i << ", " << drafts << " drafts";
        EXPECT_EQ(plain[i].drafted, 0);
        EXPECT_GT(drafted[i].drafted, 0);
      }
    }
  }
}

// Two requests drafting in a pool of one page (one slot's context): the second waits for pages
// (preempted), no draft takes a page the pool does not have, and the tokens stay those without
// drafts or a pool limit.
TEST(Qwen35Mtp, DraftsInAFullPoolLeaveTheTokensAsTheyAre) {
  const Reference ref = readReference("qwen3_5");
  const std::shared_ptr<LanguageModel> model = modelWithMtp(true);
  const std::vector<Request> requests = {request(ref.prompts[1], 60), request(ref.prompts[2], 50)};
  const std::vector<Result> plain = run(model, 0, requests);
  Engine engine(model, nullptr, {}, 2, 128, 256);
  engine.setDrafts(3);
  const std::vector<Result> drafted = engine.generate(requests);
  EXPECT_GE(engine.preemptions(), 1);
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(drafted[i].tokens, plain[i].tokens) << "request " << i;
}

// The agreeing layer guesses what the model will say, where the token is among the output rows
// a draft reads (the lowest ids and the tokens read last): here the model cycles through tokens
// the prompt holds, so every draft should be kept.
TEST(Qwen35Mtp, AnAgreeingLayersDraftsAreKept) {
  const Reference ref = readReference("qwen3_5");
  const std::shared_ptr<LanguageModel> model = modelWithMtp(true);
  std::vector<int32_t> prompt = ref.prompts[1];
  const std::vector<TokenId> first = run(model, 0, {request(prompt, 48)})[0].tokens;
  prompt.insert(prompt.end(), first.begin(), first.end());  // the model has entered its cycle
  const Result plain = run(model, 0, {request(prompt, 40)})[0];
  for (int drafts : {1, 2, 4}) {
    const Result r = run(model, drafts, {request(prompt, 40)})[0];
    EXPECT_EQ(r.tokens, plain.tokens);
    std::printf("%d drafts a step: %lld of %lld kept\n", drafts, static_cast<long long>(r.accepted),
                static_cast<long long>(r.drafted));
    EXPECT_GT(r.drafted, 0);
    EXPECT_EQ(r.accepted, r.drafted);
  }
}

// With temperature the draft is kept with its probability, else a token is drawn from the rest:
// the second token's distribution must be the model's. Its exact marginal (over the first
// token's topK choices) against 1200 draws, by chi-square.
TEST(Qwen35Mtp, SampledTokensKeepTheModelsDistribution) {
  const Reference ref = readReference("qwen3_5");
  const std::shared_ptr<LanguageModel> model = modelWithMtp(true);
  const std::vector<int32_t>& prompt = ref.prompts[1];
  Sampling s = sample(1.0, 6);
  std::map<int32_t, double> exact;
  const std::unique_ptr<SequenceState> state = model->newState(64);
  const std::vector<float> firstRow = model->forward({{state.get(), prompt}})[0].toFloats();
  for (const auto& [first, p1] : candidates(firstRow, s)) {
    std::vector<int32_t> longer = prompt;
    longer.push_back(first);
    const std::unique_ptr<SequenceState> again = model->newState(64);
    const std::vector<float> row = model->forward({{again.get(), longer}})[0].toFloats();
    for (const auto& [second, p2] : candidates(row, s)) exact[second] += p1 * p2;
  }
  constexpr int kDraws = 1200;
  std::vector<Request> requests;
  for (int i = 0; i < kDraws; ++i) {
    s.seed = static_cast<uint64_t>(i);
    requests.push_back(request(prompt, 3, s));  // the second token's step drafts the third
  }
  std::map<int32_t, int> seen;
  int64_t proposed = 0, accepted = 0;
  for (const Result& r : run(model, 2, requests)) {
    ASSERT_EQ(r.tokens.size(), 3u);
    ++seen[r.tokens[1]];
    proposed += r.drafted, accepted += r.accepted;
  }
  double chi2 = 0;
  for (const auto& [token, p] : exact) chi2 += std::pow(seen[token] - kDraws * p, 2) / (kDraws * p);
  for (const auto& [token, n] : seen) EXPECT_TRUE(exact.count(token)) << "token " << token << " cannot come second";
  std::printf("second token over %zu values: chi2 %.1f; drafts %lld, accepted %lld\n", exact.size(), chi2,
              static_cast<long long>(proposed), static_cast<long long>(accepted));
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, proposed);  // both the kept and the redrawn branch ran
  // 99.9 % quantile of chi-square with exact.size() - 1 <= 35 degrees of freedom is below 67.
  ASSERT_LE(exact.size(), 36u);
  EXPECT_LT(chi2, 67.0);
}

}  // namespace
