// netops' attention and GroupNorm steps as SIMD kernels (cpu/softmax_rows.h, cpu/norm_act.h) on
// every target this CPU runs, bit for bit against the scalar steps they stand for: gz_exp
// (netops/exp_log.h) over its whole range and its edges, the cached attention's softmax, the
// chains of fmas of the weighted value rows, the normalised channel's affine and SiLU.
#include "cpu/norm_act.h"
#include "cpu/softmax_rows.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "netops/exp_log.h"

using namespace gizml::cpu;
using gizml::netops::detail::gz_exp;

namespace {

class SoftmaxTargets : public testing::Test {
 protected:
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
};

// Equal bits, or both NaN.
void expectSame(float want, float got, const std::string& what) {
  if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << what;
  else EXPECT_EQ(std::bit_cast<uint32_t>(want), std::bit_cast<uint32_t>(got)) << what << ": " << want << " vs " << got;
}

std::vector<float> expInputs() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -1.0f, 88.72283935546875f, 88.7228394f, -103.972084045410156f, -103.97209f,
                          -87.3f, -87.4f, -100.0f, 88.0f, 200.0f, -200.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN()};
  for (float v = -110.0f; v <= 95.0f; v += 0.37f) x.push_back(v);
  // Whole vectors of 16 within [-87, 88], its ends among them (the kernel's path without fix-ups).
  while (x.size() % 16 != 0) x.push_back(0.0f);
  for (float v : {-87.0f, 88.0f, -86.99999f, 87.99999f, -87.0f, 88.0f, -50.0f, 0.0f, -87.0f, 88.0f, -1e-30f, 1e-30f,
                  -86.5f, 87.5f, -87.0f, 88.0f})
    x.push_back(v);
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> any(-20.0f, 5.0f);
  for (int i = 0; i < 500; ++i) x.push_back(any(gen));
  return x;
}

}  // namespace

TEST_F(SoftmaxTargets, ExpShiftedIsGzExpLaneByLane) {
  const std::vector<float> x = expInputs();
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (const float m : {0.0f, 3.5f, -60.0f})
      for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{16}, static_cast<int64_t>(x.size())}) {
        std::vector<float> w(x.begin(), x.begin() + n);
        expShifted(w.data(), n, m);
        for (int64_t i = 0; i < n; ++i)
          expectSame(gz_exp(x[static_cast<size_t>(i)] - m), w[static_cast<size_t>(i)],
                     std::string(hwy::TargetName(target)) + " x " + std::to_string(x[static_cast<size_t>(i)]));
      }
  }
}

TEST_F(SoftmaxTargets, WeightedRowsAreTheChainsOfFmas) {
  std::mt19937 gen(9);
  std::normal_distribution<float> normal;
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (const int64_t e : {1, 8, 24, 32, 37})
      for (const int64_t n : {1, 5, 16}) {
        const int64_t ldv = e + 3;
        std::vector<float> v(static_cast<size_t>(n * ldv)), w(static_cast<size_t>(n)), acc(static_cast<size_t>(e) + 1);
        for (float& a : v) a = normal(gen);
        for (float& a : w) a = std::abs(normal(gen));
        for (float& a : acc) a = normal(gen);
        acc.back() = -7.0f;
        std::vector<float> want(acc);
        const float c = 0.625f;
        for (int64_t x = 0; x < e; ++x) {
          float a = want[static_cast<size_t>(x)] * c;
          for (int64_t j = 0; j < n; ++j) a = std::fma(w[static_cast<size_t>(j)], v[static_cast<size_t>(j * ldv + x)], a);
          want[static_cast<size_t>(x)] = a;
        }
        weightedRows(acc.data(), e, c, w.data(), n, v.data(), ldv);
        for (int64_t x = 0; x <= e; ++x)
          expectSame(want[static_cast<size_t>(x)], acc[static_cast<size_t>(x)],
                     std::string(hwy::TargetName(target)) + " e " + std::to_string(e) + " column " + std::to_string(x));
      }
  }
}

TEST_F(SoftmaxTargets, ScaledExpIsTheScalarSteps) {
  std::mt19937 gen(21);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (const int64_t n : {1, 5, 15, 16, 17, 40, 100, 257}) {
      std::vector<float> scores(static_cast<size_t>(n) + 1);
      for (float& a : scores) a = normal(gen);
      scores[static_cast<size_t>(n / 2)] = 30.0f;  // one far above the others
      const float scale = 0.125f;
      // As the header says: scaled, the largest, gz_exp of the difference, 16 chains of the sum
      // added in order.
      std::vector<float> want(scores.begin(), scores.begin() + n);
      float top = -std::numeric_limits<float>::infinity();
      for (float& a : want) top = std::max(top, a *= scale);
      float chains[kSumChains] = {};
      for (int64_t j = 0; j < n; ++j) {
        float& a = want[static_cast<size_t>(j)];
        a = gz_exp(a - top);
        chains[j % kSumChains] += a;
      }
      float sum = 0.0f;
      for (const float chain : chains) sum += chain;
      std::vector<float> got(scores);
      const ExpSum result = scaledExp(got.data(), n, scale);
      const std::string where = std::string(hwy::TargetName(target)) + " n " + std::to_string(n);
      EXPECT_EQ(got.back(), scores.back()) << "wrote past n";
      expectSame(top, result.top, where + " top");
      expectSame(sum, result.sum, where + " sum");
      for (int64_t j = 0; j < n; ++j)
        expectSame(want[static_cast<size_t>(j)], got[static_cast<size_t>(j)], where + " at " + std::to_string(j));
    }
  }
}

TEST_F(SoftmaxTargets, NormalizeActIsTheScalarSteps) {
  std::vector<float> in = {0.0f, -0.0f, 1e-3f, 200.0f, -200.0f, std::numeric_limits<float>::quiet_NaN()};
  std::mt19937 gen(13);
  std::normal_distribution<float> normal(0.5f, 3.0f);
  for (int i = 0; i < 300; ++i) in.push_back(normal(gen));
  const float mu = 0.37f, rstd = 1.9f, w = -0.8f, b = 0.25f;
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (const bool silu : {false, true})
      for (const int64_t n : {int64_t{3}, int64_t{16}, static_cast<int64_t>(in.size())}) {
        std::vector<float> out(static_cast<size_t>(n) + 1, -9.0f);
        normalizeAct(in.data(), n, mu, rstd, w, b, silu, out.data());
        EXPECT_EQ(out.back(), -9.0f) << "wrote past n";
        for (int64_t i = 0; i < n; ++i) {
          const float scaled = (in[static_cast<size_t>(i)] - mu) * rstd, v = scaled * w + b;
          expectSame(silu ? v / (1.0f + gz_exp(-v)) : v, out[static_cast<size_t>(i)],
                     std::string(hwy::TargetName(target)) + (silu ? " SiLU " : " ") + std::to_string(i));
        }
      }
  }
}
