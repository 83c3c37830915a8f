// Gated DeltaNet's vector kernels against plain double-precision loops of their definitions, at
// sizes that reach every path: whole blocks of four vectors, single vectors and scalar tails
// (the tiny Qwen 3.5 fixtures have heads of 16 and so reach only some of them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu/delta_net.h"
#include "cpu/flush_denormals.h"

using namespace gizml::cpu;

namespace {

std::vector<float> randomValues(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

double silu(double x) { return x / (1 + std::exp(-x)); }

// Heads of 128 (Qwen3.5-0.8B's) and odd sizes past them.
class DeltaStepTest : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(DeltaStepTest, MatchesTheRuleInDouble) {
  const auto [dk, dv] = GetParam();
  std::vector<float> s = randomValues(static_cast<size_t>(dk * dv), 1, 0.3f);
  std::vector<float> q = randomValues(static_cast<size_t>(dk), 2, 0.1f), k = randomValues(static_cast<size_t>(dk), 3, 0.1f);
  const std::vector<float> v = randomValues(static_cast<size_t>(dv), 4);
  const float decay = 0.8f, beta = 0.6f;
  // S = decay S; S += k (beta (v - S^T k))^T; o = S^T q
  std::vector<double> want(s.begin(), s.end()), delta(static_cast<size_t>(dv)), o(static_cast<size_t>(dv));
  for (double& x : want) x *= decay;
  for (int64_t j = 0; j < dv; ++j) {
    double kv = 0;
    for (int64_t i = 0; i < dk; ++i) kv += want[static_cast<size_t>(i * dv + j)] * k[static_cast<size_t>(i)];
    delta[static_cast<size_t>(j)] = beta * (v[static_cast<size_t>(j)] - kv);
  }
  for (int64_t i = 0; i < dk; ++i)
    for (int64_t j = 0; j < dv; ++j) want[static_cast<size_t>(i * dv + j)] += k[static_cast<size_t>(i)] * delta[static_cast<size_t>(j)];
  for (int64_t j = 0; j < dv; ++j)
    for (int64_t i = 0; i < dk; ++i) o[static_cast<size_t>(j)] += want[static_cast<size_t>(i * dv + j)] * q[static_cast<size_t>(i)];

  std::vector<float> got(static_cast<size_t>(dv));
  delta::step(s.data(), q.data(), k.data(), v.data(), decay, beta, dk, dv, got.data());
  for (size_t i = 0; i < s.size(); ++i) ASSERT_NEAR(s[i], want[i], 1e-5) << "state value " << i;
  for (int64_t j = 0; j < dv; ++j) ASSERT_NEAR(got[static_cast<size_t>(j)], o[static_cast<size_t>(j)], 1e-5) << "output " << j;
}

INSTANTIATE_TEST_SUITE_P(Sizes, DeltaStepTest,
                         ::testing::Values(std::pair<int64_t, int64_t>{128, 128}, std::pair<int64_t, int64_t>{16, 16},
                                           std::pair<int64_t, int64_t>{33, 77}, std::pair<int64_t, int64_t>{5, 3}));

TEST(DeltaKernels, ConvSiluReadsTheHeldRowsThenTheNewOnes) {
  // 300 rows: parts of about 16,384 floats' work go to the pool's threads (110 rows each here).
  const int64_t rows = 300, channels = 37, kernel = 4, held = kernel - 1;
  const std::vector<float> before = randomValues(static_cast<size_t>(held * channels), 5);
  const std::vector<float> x = randomValues(static_cast<size_t>(rows * channels), 6);
  const std::vector<float> taps = randomValues(static_cast<size_t>(kernel * channels), 7, 0.5f);
  std::vector<float> out(static_cast<size_t>(rows * channels));
  delta::convSilu(before.data(), x.data(), taps.data(), rows, channels, kernel, out.data());
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t c = 0; c < channels; ++c) {
      double sum = 0;
      for (int64_t j = 0; j < kernel; ++j) {
        const int64_t r = t + j;
        const float in = r < held ? before[static_cast<size_t>(r * channels + c)] : x[static_cast<size_t>((r - held) * channels + c)];
        sum += static_cast<double>(taps[static_cast<size_t>(j * channels + c)]) * in;
      }
      ASSERT_NEAR(out[static_cast<size_t>(t * channels + c)], silu(sum), 1e-5) << "row " << t << " channel " << c;
    }
}

TEST(DeltaKernels, L2NormalizeScalesEachRunToTheGivenLength) {
  const int64_t count = 3, stride = 50, n = 45;
  std::vector<float> x = randomValues(static_cast<size_t>(count * stride), 8);
  const std::vector<float> before = x;
  delta::l2normalize(x.data(), count, stride, n, 0.5f);
  for (int64_t r = 0; r < count; ++r) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(before[static_cast<size_t>(r * stride + i)]) * before[static_cast<size_t>(r * stride + i)];
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(x[static_cast<size_t>(r * stride + i)], 0.5 * before[static_cast<size_t>(r * stride + i)] / std::sqrt(sum + 1e-6), 1e-6);
    for (int64_t i = n; i < stride; ++i) ASSERT_EQ(x[static_cast<size_t>(r * stride + i)], before[static_cast<size_t>(r * stride + i)]) << "past the run";
  }
}

TEST(DeltaKernels, GatedNormIsRmsNormTimesWeightTimesSiluOfTheGate) {
  const int64_t count = 1500, n = 27;  // parts of 606 runs over the pool's threads
  const float eps = 1e-6f;
  std::vector<float> o = randomValues(static_cast<size_t>(count * n), 9);
  const std::vector<float> before = o, z = randomValues(o.size(), 10), w = randomValues(static_cast<size_t>(n), 11);
  delta::gatedNorm(o.data(), z.data(), w.data(), count, n, eps);
  for (int64_t r = 0; r < count; ++r) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(before[static_cast<size_t>(r * n + i)]) * before[static_cast<size_t>(r * n + i)];
    const double inv = 1 / std::sqrt(sum / n + eps);
    for (int64_t i = 0; i < n; ++i) {
      const auto at = static_cast<size_t>(r * n + i);
      ASSERT_NEAR(o[at], before[at] * inv * w[static_cast<size_t>(i)] * silu(z[at]), 1e-5) << "row " << r << " value " << i;
    }
  }
}

}  // namespace

// The chunked rule (a prefill's) against the token-by-token one (a decode's, checked against
// double above) where one head's decays take its state and the chunk's decay products through
// the denormal range, which both flush to zero (FlushDenormals), and another's stay near 1.
TEST(DeltaRule, ChunkedAsTokenByTokenThroughTheDenormalRange) {
  const delta::Heads h{1, 2, 128, 128};
  const int64_t rows = 150, channels = 2 * h.keyHeads * h.keyDim + h.valueHeads * h.valueDim;
  const std::vector<float> mixed = randomValues(static_cast<size_t>(rows * channels), 21, 0.1f);
  std::vector<float> beta(static_cast<size_t>(rows * h.valueHeads)), g(beta.size());
  for (int64_t t = 0; t < rows; ++t) {
    beta[static_cast<size_t>(t * 2)] = beta[static_cast<size_t>(t * 2 + 1)] = 0.5f;
    g[static_cast<size_t>(t * 2)] = -3.0f;   // e^-3 a token: e^-192 over a chunk
    g[static_cast<size_t>(t * 2 + 1)] = -0.02f;
  }
  const std::vector<float> start = randomValues(static_cast<size_t>(h.valueHeads * h.keyDim * h.valueDim), 22);
  std::vector<float> memoryA = start, memoryB = start, oA(static_cast<size_t>(rows * h.valueHeads * h.valueDim)), oB(oA.size());
  delta::recurrent(h, mixed.data(), beta.data(), g.data(), rows, memoryA.data(), oA.data());
  delta::chunked(h, mixed.data(), beta.data(), g.data(), rows, memoryB.data(), oB.data());
  double range = 0, worst = 0;
  for (size_t i = 0; i < oA.size(); ++i) {
    range = std::max(range, std::fabs(static_cast<double>(oA[i])));
    worst = std::max(worst, std::fabs(static_cast<double>(oA[i]) - oB[i]));
  }
  EXPECT_GT(range, 1e-3);
  EXPECT_LT(worst, 1e-5 * range);
  for (size_t i = 0; i < memoryA.size(); ++i) ASSERT_NEAR(memoryA[i], memoryB[i], 1e-5) << i;
}

#if defined(__x86_64__) || defined(__i386__)
TEST(FlushDenormals, FlushesInItsScopeOnly) {
  volatile float tiny = 1e-30f, small = 1e-10f;  // their product, 1e-40, is denormal
  volatile float denormal = std::numeric_limits<float>::denorm_min();
  {
    const FlushDenormals flush;
    EXPECT_EQ(tiny * small, 0.0f);
    EXPECT_EQ(denormal * 2.0f, 0.0f);  // a denormal input reads as zero
  }
  EXPECT_GT(tiny * small, 0.0f);
  EXPECT_GT(denormal * 2.0f, 0.0f);
}
#endif
