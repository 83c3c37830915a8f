// Batch invariance (docs/architecture.md): a sequence's logits are the same bits whatever else
// runs in its passes, wherever its feed sits among them, whatever its state held before (a start
// kept from an earlier sequence), however its tokens are split over passes (a prefill at once, in
// parts, a token at a time) and however many rows a pass has. A property test over random
// compositions on the tiny transformers models (tests/data/models): 16-bit and 4-bit layers,
// every kind of KV cache; the reference is the target read by a fresh state in one pass. Then
// the engine: concurrent requests, greedy and seeded, each gives the tokens and log
// probabilities it gives alone.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <tuple>

#include "llm/language_model.h"
#include "llm_test_util.h"
#include "model_reference.h"

namespace {

constexpr int64_t kCapacity = 64;

std::vector<int32_t> randomTokens(std::mt19937& rng, int64_t n, int64_t vocab) {
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int32_t& t : out) t = token(rng);
  return out;
}

int64_t uniform(std::mt19937& rng, int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }

// Up to 15 other sequences, each having read a few tokens already.
std::vector<std::unique_ptr<SequenceState>> neighbours(std::mt19937& rng, LanguageModel& model) {
  std::vector<std::unique_ptr<SequenceState>> others(static_cast<size_t>(uniform(rng, 0, 15)));
  for (std::unique_ptr<SequenceState>& o : others) {
    o = model.newState(kCapacity);
    if (uniform(rng, 0, 1) == 1) model.forward({{o.get(), randomTokens(rng, uniform(rng, 1, 20), model.config().vocabSize)}});
  }
  return others;
}

// A pass's feeds: most of the others with a few tokens each, and `target` at a random place,
// which *slot says.
std::vector<Feed> passWith(std::mt19937& rng, const std::vector<std::unique_ptr<SequenceState>>& others, int64_t vocab,
                           Feed target, size_t* slot) {
  std::vector<Feed> feeds;
  for (const std::unique_ptr<SequenceState>& o : others) {
    const int64_t room = kCapacity - o->length();
    if (room > 0 && uniform(rng, 0, 3) > 0)
      feeds.push_back({o.get(), randomTokens(rng, uniform(rng, 1, std::min<int64_t>(room, 24)), vocab), uniform(rng, 0, 1) == 1});
  }
  *slot = static_cast<size_t>(uniform(rng, 0, static_cast<int64_t>(feeds.size())));
  feeds.insert(feeds.begin() + static_cast<std::ptrdiff_t>(*slot), std::move(target));
  return feeds;
}

// How many tokens each pass reads of a sequence of `length`: one half the time (a decode step),
// else a random part of the rest.
std::vector<int64_t> randomSplit(std::mt19937& rng, int64_t from, int64_t length) {
  std::vector<int64_t> parts;
  for (int64_t read = from; read < length; read += parts.back())
    parts.push_back(uniform(rng, 0, 1) == 0 ? 1 : uniform(rng, 1, length - read));
  return parts;
}

using Param = std::tuple<std::string, int, DType>;

class BatchInvariance : public ::testing::TestWithParam<Param> {};

TEST_P(BatchInvariance, ATargetsLogitsDoNotDependOnItsBatch) {
  const auto& [arch, bits, kv] = GetParam();
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(converted(arch, bits), {.kvCache = kv});
  const int64_t vocab = model->config().vocabSize;
  const auto rowBytes = static_cast<size_t>(vocab) * sizeof(float);
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 12; ++trial) {
    const std::vector<int32_t> target = randomTokens(rng, uniform(rng, 2, 48), vocab);
    const auto length = static_cast<int64_t>(target.size());
    const std::vector<float> reference = logitsOf(*model, target);

    // The target's state: fresh, or holding another sequence that shares a start with the target
    // (an engine's slot kept for its prefix), read in parts.
    const std::unique_ptr<SequenceState> state = model->newState(kCapacity);
    int64_t read = 0;
    if (trial % 2 == 1) {
      const int64_t shared = uniform(rng, 0, length - 1);
      std::vector<int32_t> before(target.begin(), target.begin() + shared);
      const std::vector<int32_t> rest = randomTokens(rng, uniform(rng, 1, 12), vocab);
      before.insert(before.end(), rest.begin(), rest.end());
      for (size_t at = 0; at < before.size();) {
        const auto n = static_cast<size_t>(uniform(rng, 1, static_cast<int64_t>(before.size() - at)));
        model->forward({{state.get(), std::vector<int32_t>(before.begin() + at, before.begin() + at + n)}});
        at += n;
      }
      state->truncate(shared);
      read = shared;
    }
    const std::vector<std::unique_ptr<SequenceState>> others = neighbours(rng, *model);
    for (const int64_t n : randomSplit(rng, read, length)) {
      size_t slot = 0;
      const std::vector<Feed> feeds =
          passWith(rng, others, vocab, {state.get(), std::vector<int32_t>(target.begin() + read, target.begin() + read + n), true}, &slot);
      const std::vector<float> got = model->forward(feeds)[slot].toFloats();
      ASSERT_EQ(got.size(), static_cast<size_t>(n * vocab));
      for (int64_t r = 0; r < n; ++r)
        ASSERT_EQ(std::memcmp(got.data() + r * vocab, reference.data() + (read + r) * vocab, rowBytes), 0)
            << "trial " << trial << ": position " << read + r << " of " << length << ", fed " << n << " at once as feed "
            << slot << " of " << feeds.size() << ", its state reused from " << (trial % 2 == 1 ? "a stale sequence" : "fresh");
      read += n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, BatchInvariance,
    ::testing::Combine(::testing::Values("llama", "qwen3", "gemma3"), ::testing::Values(16, 4),
                       ::testing::Values(DType::F32, DType::F16, DType::BF16)),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "bits_kv" +
             dtypeName(std::get<2>(info.param));
    });

// Qwen 3.5's Gated DeltaNet layers read a prefill by the chunked delta rule and a decode step by
// the recurrence, which agree to rounding only (docs/architecture.md): there a sequence's logits
// depend on how its tokens are split over passes, but not on the other sequences of its passes.
class HybridBatchInvariance : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(HybridBatchInvariance, ATargetsLogitsDoNotDependOnItsNeighbours) {
  const auto& [arch, bits] = GetParam();
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(converted(arch, bits));
  const int64_t vocab = model->config().vocabSize;
  std::mt19937 rng(4321);
  for (int trial = 0; trial < 6; ++trial) {
    const std::vector<int32_t> target = randomTokens(rng, uniform(rng, 2, 40), vocab);
    const std::vector<int64_t> split = randomSplit(rng, 0, static_cast<int64_t>(target.size()));
    const std::unique_ptr<SequenceState> alone = model->newState(kCapacity), beside = model->newState(kCapacity);
    const std::vector<std::unique_ptr<SequenceState>> others = neighbours(rng, *model);
    int64_t read = 0;
    for (const int64_t n : split) {
      const std::vector<int32_t> part(target.begin() + read, target.begin() + read + n);
      const std::vector<float> want = model->forward({{alone.get(), part, true}})[0].toFloats();
      size_t slot = 0;
      const std::vector<Feed> feeds = passWith(rng, others, vocab, {beside.get(), part, true}, &slot);
      const std::vector<float> got = model->forward(feeds)[slot].toFloats();
      ASSERT_EQ(got.size(), want.size());
      ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
          << "trial " << trial << ": positions " << read << ".." << read + n - 1 << " as feed " << slot << " of " << feeds.size();
      read += n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, HybridBatchInvariance,
                         ::testing::Combine(::testing::Values("qwen3_5", "qwen3_5_moe"), ::testing::Values(16, 4)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "bits";
                         });

// 8 requests at once (4 the same, 4 different; greedy and seeded, two with penalties and a logit
// bias) through one engine whose slots held other requests before, each against itself alone in
// a fresh engine (where its draws run one by one, not beside the others': drawSideBySide).
TEST(BatchInvarianceEngine, ConcurrentRequestsGiveWhatTheyGiveAlone) {
  const std::shared_ptr<LanguageModel> model = buildLanguageModel(converted("llama", 4));
  const int64_t vocab = model->config().vocabSize;
  std::mt19937 rng(99);
  const std::vector<int32_t> common = randomTokens(rng, 20, vocab);
  std::vector<Request> requests;
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> prompt = common;
    if (i >= 4) {  // a different ending each, some sharing the start of the others
      const std::vector<int32_t> tail = randomTokens(rng, 3 + i, vocab);
      prompt.resize(static_cast<size_t>(uniform(rng, 0, 19)));
      prompt.insert(prompt.end(), tail.begin(), tail.end());
    }
    Sampling s = i % 2 == 0 ? greedy() : sample(1.0, 0, 1.0, 7 + static_cast<uint64_t>(i / 4));
    s.logprobs = 0;
    if (i == 3 || i == 6) {  // penalties and a bias change the row before the draw and its logprobs
      s.presencePenalty = 0.5;
      s.frequencyPenalty = 0.3;
      s.repetitionPenalty = 1.2;
      s.logitBias = {{prompt.back(), 3.0f}, {1, -100.0f}};
    }
    requests.push_back(request(prompt, 16, s));
  }
  const auto alone = [&](const Request& r) {
    Engine engine(model, nullptr, {}, 1, kCapacity);
    return engine.generate({r})[0];
  };
  Engine shared(model, nullptr, {}, 8, kCapacity);
  shared.generate({request(randomTokens(rng, 30, vocab), 8), request(common, 5), request({common[0], 3, 4}, 9)});
  const std::vector<Result> together = shared.generate(requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    const Result want = alone(requests[i]);
    EXPECT_EQ(together[i].tokens, want.tokens) << "request " << i;
    ASSERT_EQ(together[i].logprobs.size(), want.logprobs.size());
    for (size_t t = 0; t < want.logprobs.size(); ++t)
      EXPECT_EQ(std::memcmp(&together[i].logprobs[t].logprob, &want.logprobs[t].logprob, sizeof(float)), 0)
          << "request " << i << ", token " << t << ": " << together[i].logprobs[t].logprob << " together, "
          << want.logprobs[t].logprob << " alone";
  }
  // Again one at a time in the used engine: slots that held the others' prompts.
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(shared.generate({requests[i]})[0].tokens, together[i].tokens);
}

}  // namespace
