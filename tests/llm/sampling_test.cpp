// Each sampler against a reference computed here: distributions, draws, penalties, seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "llm/engine/sampling.h"
#include "llm_test_util.h"

using namespace gizml::llm;

namespace {

const std::vector<float> kLogits = {1.0f, 2.5f, -0.5f, 2.5f, 0.3f, 3.1f, -2.0f, 1.7f, 0.9f, 2.2f};

// softmax(logits / T), then topK, topP (smallest most-likely set reaching P), minP (relative to
// the most likely), renormalized: written from the definitions, one cut at a time.
std::map<TokenId, double> reference(const std::vector<float>& logits, double t, int k, double p, double minP) {
  std::vector<std::pair<double, TokenId>> probs;
  double z = 0;
  for (float l : logits) z += std::exp(l / t);
  for (size_t i = 0; i < logits.size(); ++i) probs.emplace_back(std::exp(logits[i] / t) / z, static_cast<TokenId>(i));
  std::stable_sort(probs.begin(), probs.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (k > 0) probs.resize(static_cast<size_t>(k));
  const auto normalize = [&] {
    double s = 0;
    for (const auto& q : probs) s += q.first;
    for (auto& q : probs) q.first /= s;
  };
  normalize();
  double cum = 0;
  size_t keep = 0;
  while (keep < probs.size() && cum < p) cum += probs[keep++].first;
  probs.resize(keep);
  const double top = probs[0].first;
  std::erase_if(probs, [&](const auto& q) { return q.first < minP * top; });
  normalize();
  std::map<TokenId, double> out;
  for (const auto& [q, id] : probs) out[id] = q;
  return out;
}

Sampling cut(double t, int k, double p, double minP) {
  Sampling s = sample(t, k, p, 7);
  s.minP = minP;
  return s;
}

}  // namespace

TEST(Sampling, CandidatesMatchTheReference) {
  for (double t : {0.3, 1.0, 2.0})
    for (int k : {0, 1, 3, 6})
      for (double p : {1.0, 0.9, 0.5})
        for (double minP : {0.0, 0.2}) {
          SCOPED_TRACE(::testing::Message() << "t " << t << " k " << k << " p " << p << " minP " << minP);
          const std::map<TokenId, double> want = reference(kLogits, t, k, p, minP);
          const auto got = candidates(kLogits, cut(t, k, p, minP));
          ASSERT_EQ(got.size(), want.size());
          for (const auto& [id, prob] : got) {
            ASSERT_TRUE(want.count(id)) << id;
            EXPECT_NEAR(prob, want.at(id), 1e-9) << id;
          }
        }
}

TEST(Sampling, DrawsFollowTheDistribution) {
  for (const Sampling& s : {cut(1.0, 0, 1.0, 0.0), cut(0.7, 5, 0.9, 0.0), cut(1.5, 0, 1.0, 0.1)}) {
    const std::map<TokenId, double> want = reference(kLogits, s.temperature, s.topK, s.topP, s.minP);
    const int n = 40000;
    std::map<TokenId, int> counts;
    for (int i = 0; i < n; ++i) ++counts[chooseToken(kLogits, s, static_cast<uint64_t>(i))];
    for (const auto& [id, c] : counts) EXPECT_TRUE(want.count(id)) << "token " << id << " was cut";
    for (const auto& [id, p] : want) {
      // Within 5 standard deviations of the binomial count.
      const double sd = std::sqrt(n * p * (1 - p));
      EXPECT_NEAR(counts[id], n * p, 5 * sd + 1) << "token " << id;
    }
  }
}

TEST(Sampling, GreedyTakesTheLowestIdOfTheHighest) {
  EXPECT_EQ(chooseToken(kLogits, greedy(), 0), 5);
  const std::vector<float> tie = {0.0f, 4.0f, 4.0f};
  EXPECT_EQ(chooseToken(tie, greedy(), 0), 1);
}

TEST(Sampling, SameSeedSameTokens) {
  const Sampling a = sample(1.0, 0, 1.0, 42), b = sample(1.0, 0, 1.0, 43);
  std::vector<TokenId> first, again, other;
  for (uint64_t i = 0; i < 64; ++i) {
    first.push_back(chooseToken(kLogits, a, i));
    again.push_back(chooseToken(kLogits, a, i));
    other.push_back(chooseToken(kLogits, b, i));
  }
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other);
  EXPECT_EQ(drawUniform(42, 5), drawUniform(42, 5));
  EXPECT_NE(drawUniform(42, 5), drawUniform(42, 6));
}

TEST(Sampling, PenaltiesAsHandComputed) {
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
  Sampling s;
  s.repetitionPenalty = 2.0;
  s.presencePenalty = 0.5;
  s.frequencyPenalty = 0.25;
  const std::vector<TokenId> prompt = {0, 1};
  const std::vector<TokenId> generated = {3, 3, 1};
  applyPenalties(logits, s, prompt, generated);
  // Repetition on tokens 0, 1, 3 (prompt and output): positive / 2, negative * 2; then
  // presence 0.5 and frequency 0.25 per use on the generated 3 (twice) and 1 (once).
  EXPECT_FLOAT_EQ(logits[0], 1.0f);
  EXPECT_FLOAT_EQ(logits[1], -2.0f - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(logits[2], 0.5f);
  EXPECT_FLOAT_EQ(logits[3], 1.5f - 0.5f - 0.5f);
  EXPECT_FLOAT_EQ(logits[4], -2.0f);
}

TEST(Sampling, LogprobsAreLogSoftmax) {
  const TokenLogprob lp = logprobOf(kLogits, 2, 4);
  double z = 0;
  for (float l : kLogits) z += std::exp(l);
  EXPECT_NEAR(lp.logprob, -0.5 - std::log(z), 1e-5);
  ASSERT_EQ(lp.top.size(), 4u);
  EXPECT_EQ(lp.top[0].first, 5);
  EXPECT_EQ(lp.top[1].first, 1);  // 2.5 twice: the lower id first
  EXPECT_EQ(lp.top[2].first, 3);
  EXPECT_EQ(lp.top[3].first, 9);
}

TEST(Sampling, OutOfRangeSettingsAreNamed) {
  expectError([] { validateSampling(sample(-1.0)); }, {"temperature -1"});
  for (const Sampling& s : {greedy(), sample(1.0), sample(1.0, 5)}) {
    expectError([&] { chooseToken(std::vector<float>{}, s, 0); }, {"no logits"});
    expectError([&] { verifyDraft(std::vector<float>{}, s, 0, 0); }, {"no logits"});
  }
  expectError([] { validateSampling(sample(1.0, 0, 1.01)); }, {"topP", "(0, 1]"});
  expectError([] { validateSampling(sample(1.0, 0, 0.0)); }, {"topP"});
  expectError([] { validateSampling(sample(1.0, -1)); }, {"topK -1"});
  expectError([] { validateSampling(sample(NAN)); }, {"temperature"});
  Sampling s;
  s.minP = 2;
  expectError([&] { validateSampling(s); }, {"minP"});
  s = {};
  s.repetitionPenalty = 0;
  expectError([&] { validateSampling(s); }, {"repetitionPenalty"});
  s = {};
  s.logprobs = -3;
  expectError([&] { validateSampling(s); }, {"logprobs"});
}

// A draw with no topK reads the whole row without sorting it all (RowDraw): the same tokens as the
// row's full head through candidates (the sorted path), draft checks too, on vocabulary-sized
// rows with ties and every cut.
TEST(Sampling, WholeRowDrawsAsTheSortedHead) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> row(20000);
  for (float& v : row) v = std::round(normal(rng) * 8.0f) / 8.0f;  // many equal logits
  row[777] = row[12345] = 14.0f;                                     // tied at the top
  const RowHead full = headOf(row, row.size());
  for (double t : {0.5, 1.0, 1.7})
    for (double p : {1.0, 0.9, 0.3})
      for (double minP : {0.0, 0.05}) {
        SCOPED_TRACE(::testing::Message() << "t " << t << " p " << p << " minP " << minP);
        Sampling s = sample(t, 0, p, 11);
        s.minP = minP;
        for (uint64_t i = 0; i < 60; ++i) {
          ASSERT_EQ(chooseToken(row, s, i), chooseToken(full, s, i)) << i;
          const TokenId draft = static_cast<TokenId>((i * 7919) % row.size());
          ASSERT_EQ(verifyDraft(row, s, i, draft), verifyDraft(full, s, i, draft)) << i;
          ASSERT_EQ(verifyDraft(row, s, i, 777), verifyDraft(full, s, i, 777)) << i;
        }
      }
  EXPECT_EQ(chooseToken(row, greedy(), 0), 777);
  // The head's order: highest logit first, the lower id first among equals (a stable sort).
  std::vector<TokenId> ids(row.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<TokenId>(i);
  std::stable_sort(ids.begin(), ids.end(), [&](TokenId a, TokenId b) { return row[size_t(a)] > row[size_t(b)]; });
  ASSERT_EQ(full.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(full[i].first, ids[i]) << i;
  const RowHead few = headOf(row, 40);
  EXPECT_EQ(RowHead(full.begin(), full.begin() + 40), few);
}

// Draws far down the order (uniforms above 0.995) walk past many of the row's buckets at once:
// they land where the sorted head's walk, token by token, lands.
TEST(Sampling, WholeRowDrawsReachTheTail) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(30000);
  for (float& v : row) v = std::round(normal(rng) * 16.0f) / 16.0f;  // ties, and a mass spread wide
  const RowHead full = headOf(row, row.size());
  std::vector<uint64_t> deep;
  for (uint64_t i = 0; deep.size() < 40; ++i)
    if (drawUniform(3, i) > 0.995) deep.push_back(i);
  for (double t : {0.6, 1.0, 2.5})
    for (double p : {1.0, 0.999}) {
      SCOPED_TRACE(::testing::Message() << "t " << t << " p " << p);
      const Sampling s = sample(t, 0, p, 3);
      std::vector<TokenId> drawn;
      for (const uint64_t i : deep) {
        drawn.push_back(chooseToken(row, s, i));
        ASSERT_EQ(drawn.back(), chooseToken(full, s, i)) << i;
      }
      // Past the first few hundred of the order (the head a shallow draw reads).
      const auto rankOf = [&](TokenId id) {
        return std::find_if(full.begin(), full.end(), [&](const auto& e) { return e.first == id; }) - full.begin();
      };
      EXPECT_GT(rankOf(*std::max_element(drawn.begin(), drawn.end(), [&](TokenId a, TokenId b) {
                  return rankOf(a) < rankOf(b);
                })),
                300);
    }
}

// A NaN logit weighs nothing (as -inf would); a row with no finite highest logit, or a temperature
// so small that 1 / t overflows, draws greedy's token instead of an undefined one.
TEST(Sampling, DrawsPassOverNaNAndInfiniteLogits) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> withNaN = kLogits, withInf = kLogits;
  for (size_t i : {1, 5, 8}) {
    withNaN[i] = nan;
    withInf[i] = -inf;
  }
  withNaN[6] = withInf[6] = -inf;
  const RowHead head = headOf(withInf, withInf.size());
  for (const Sampling& s : {cut(1.0, 0, 1.0, 0.0), cut(0.7, 0, 0.8, 0.05)})
    for (uint64_t i = 0; i < 200; ++i) {
      const TokenId t = chooseToken(withNaN, s, i);
      ASSERT_EQ(t, chooseToken(head, s, i)) << i;
      ASSERT_TRUE(t != 1 && t != 5 && t != 6 && t != 8) << t;
      ASSERT_EQ(verifyDraft(withNaN, s, i, 5), verifyDraft(head, s, i, 5)) << i;
    }
  const Sampling s = cut(1.0, 0, 1.0, 0.0);
  EXPECT_EQ(chooseToken(std::vector<float>{nan, nan, nan}, s, 0), 0);
  EXPECT_EQ(chooseToken(std::vector<float>{nan, -inf, -inf}, s, 0), 1);
  EXPECT_EQ(chooseToken(std::vector<float>{1.0f, inf, 2.0f, inf}, s, 0), 1);
  for (uint64_t i = 0; i < 20; ++i) EXPECT_EQ(chooseToken(kLogits, cut(1e-40, 0, 1.0, 0.0), i), 5);
}

// A short head (a topK, logprobs' top) is the full order's first ids, through ties, signed zeros,
// infinities and NaNs, also where NaNs must fill it.
TEST(Sampling, ShortHeadsAsTheFullOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(4);
  std::vector<float> row(3000);
  for (float& v : row) v = static_cast<float>(static_cast<int>(rng() % 41) - 20) / 4.0f;
  for (size_t i = 0; i < row.size(); i += 97) row[i] = nan;
  for (size_t i = 5; i < row.size(); i += 131) row[i] = -0.0f;
  row[7] = -inf;
  row[2999] = inf;
  const std::vector<float> fewFinite = {nan, 1.0f, nan, -inf, nan, -0.0f, 0.0f, nan};
  for (const std::vector<float>& r : {row, fewFinite}) {
    const RowHead full = headOf(r, r.size());
    for (size_t keep : {1, 2, 5, 7, 40, 256, 257}) {
      const size_t n = std::min(keep, r.size());
      const RowHead head = headOf(r, keep);
      ASSERT_EQ(head.size(), n) << keep;
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(head[i].first, full[i].first) << "keep " << keep << " rank " << i;
    }
  }
  // The full order itself: -0 as +0 and NaN as -inf, the lower id first among equals.
  const RowHead order = headOf(fewFinite, fewFinite.size());
  std::vector<TokenId> ids;
  for (const auto& e : order) ids.push_back(e.first);
  EXPECT_EQ(ids, (std::vector<TokenId>{1, 5, 6, 0, 2, 3, 4, 7}));
}
