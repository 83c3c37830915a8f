// The coding of keys and values in 8, 4 and 2 bits (cpu/kv_codes.h) against its definition: the
// codes are the nearest for the stored pair, the pair is the least-squares fit for the codes (to
// F16 rounding; worked out here in double precision from the normal equations), and the error is
// at most that of the min/max range's codes, by a wide margin where one value is an outlier.
#include "cpu/kv_codes.h"

#include <gizml/dtype.h>
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

using namespace gizml;
using namespace gizml::cpu;

namespace {

std::vector<float> normalValues(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.3f, 1.5f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = dist(rng);
  return x;
}

// The error of the min/max range's nearest codes, with the pair stored as F16 as ours is.
double minMaxError(const std::vector<float>& x, int bits) {
  const int top = (1 << bits) - 1;
  const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
  const CodeRange range{floatToHalf((*hi - *lo) / static_cast<float>(top)), floatToHalf(*lo)};
  const float s = halfToFloat(range.scale), o = halfToFloat(range.offset);
  std::vector<uint8_t> q(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    q[i] = static_cast<uint8_t>(std::clamp(std::nearbyint((x[i] - o) / s), 0.0f, static_cast<float>(top)));
  return codingError(x.data(), q.data(), static_cast<int64_t>(x.size()), range);
}

void expectLeastSquares(const std::vector<float>& x, int bits) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(x.size(), 255);
  const CodeRange range = codeValues(x.data(), n, bits, q.data());
  const double s = halfToFloat(range.scale), o = halfToFloat(range.offset);
  const int top = (1 << bits) - 1;
  double sq = 0, sx = 0, sqq = 0, sqx = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_LE(q[static_cast<size_t>(i)], top) << "code " << i;
    // A nearest code for the stored pair: neither neighbour on the grid is closer.
    const double code = q[static_cast<size_t>(i)], v = x[static_cast<size_t>(i)];
    const double miss = std::fabs(s * code + o - v);
    if (code > 0) {
      EXPECT_LE(miss, std::fabs(s * (code - 1) + o - v) + 1e-6) << "code " << i << ", " << bits << " bits";
    }
    if (code < top) {
      EXPECT_LE(miss, std::fabs(s * (code + 1) + o - v) + 1e-6) << "code " << i << ", " << bits << " bits";
    }
    sq += code, sx += x[static_cast<size_t>(i)], sqq += code * code, sqx += code * x[static_cast<size_t>(i)];
  }
  // The least-squares pair for these codes, against the stored one (F16: 2^-11 relative, and
  // the codes may differ from the fit's last ones where F16 rounding moved a value across a tie).
  const double det = static_cast<double>(n) * sqq - sq * sq;
  const double fitS = (static_cast<double>(n) * sqx - sq * sx) / det, fitO = (sx - fitS * sq) / static_cast<double>(n);
  EXPECT_NEAR(s, fitS, 2e-3 * std::fabs(fitS)) << bits << " bits";
  EXPECT_NEAR(o, fitO, 2e-3 * std::fabs(fitS) * top + 1e-3 * std::fabs(fitO)) << bits << " bits";
  const double ours = codingError(x.data(), q.data(), n, range), minMax = minMaxError(x, bits);
  EXPECT_LE(ours, minMax * (1 + 1e-3)) << bits << " bits";
}

}  // namespace

TEST(KvCodes, TheLeastSquaresPairAndTheNearestCodes) {
  for (int bits : {8, 4, 2})
    for (int64_t n : {64, 128, 80}) expectLeastSquares(normalValues(n, static_cast<unsigned>(bits * 1000 + n)), bits);
}

TEST(KvCodes, AnOutlierCostsLessThanWithTheMinMaxRange) {
  // One large activation, as keys have in some channels. The min/max range spends its levels on
  // the span up to it; at 2 bits that leaves the bulk of the values on one or two levels, and the
  // fit moves the levels to them (at 4 bits the outlier still sets the range: its own error would
  // cost more than the bulk's, so the fit gains little there).
  std::vector<float> x = normalValues(128, 7);
  x[5] = 40.0f;
  for (auto [bits, share] : {std::pair{4, 1.0}, std::pair{2, 0.5}}) {
    std::vector<uint8_t> q(x.size());
    const CodeRange range = codeValues(x.data(), 128, bits, q.data());
    const double ours = codingError(x.data(), q.data(), 128, range), minMax = minMaxError(x, bits);
    std::printf("  %d bits, one outlier: squared error %.4g, the min/max range's %.4g\n", bits, ours, minMax);
    EXPECT_LE(ours, share * minMax) << bits << " bits";
  }
}

TEST(KvCodes, ValuesOnTheGridComeBackExactly) {
  for (int bits : {8, 4, 2}) {
    std::vector<float> x;
    for (int i = 0; i < 3 * (1 << bits); ++i) x.push_back(0.25f * static_cast<float>(i % (1 << bits)) - 1.5f);
    std::vector<uint8_t> q(x.size());
    const CodeRange range = codeValues(x.data(), static_cast<int64_t>(x.size()), bits, q.data());
    EXPECT_EQ(codingError(x.data(), q.data(), static_cast<int64_t>(x.size()), range), 0.0) << bits << " bits";
  }
  const std::vector<float> same(64, 2.5f);
  std::vector<uint8_t> q(64);
  const CodeRange range = codeValues(same.data(), 64, 4, q.data());
  EXPECT_EQ(codingError(same.data(), q.data(), 64, range), 0.0);
}

TEST(KvCodes, TheSameCodesAndPairOnEveryTarget) {
  // Every length up to 2 heads of 128 (every vector tail), the three widths, and vectors with
  // both zeros as their least value; the first target's codes are the reference for the others.
  std::vector<std::vector<float>> inputs;
  for (int64_t n = 1; n <= 256; n += n < 40 ? 1 : 37) inputs.push_back(normalValues(n, static_cast<unsigned>(n)));
  inputs.push_back({0.0f, -0.0f, 1.0f, 2.0f, -0.0f, 0.0f, 3.0f, 0.5f, 0.25f});
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  if (targets.size() < 2) GTEST_SKIP() << "this build has one Highway target: nothing to compare";
  std::vector<std::vector<uint8_t>> want;
  std::vector<CodeRange> wantRange;
  for (const int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    size_t k = 0;
    for (int bits : {8, 4, 2})
      for (const std::vector<float>& x : inputs) {
        std::vector<uint8_t> q(x.size(), 99);
        const CodeRange range = codeValues(x.data(), static_cast<int64_t>(x.size()), bits, q.data());
        if (target == targets.front()) {
          want.push_back(q), wantRange.push_back(range);
        } else {
          ASSERT_EQ(q, want[k]) << hwy::TargetName(target) << ", " << bits << " bits, n " << x.size();
          ASSERT_EQ(range.scale, wantRange[k].scale) << hwy::TargetName(target) << ", n " << x.size();
          ASSERT_EQ(range.offset, wantRange[k].offset) << hwy::TargetName(target) << ", n " << x.size();
        }
        ++k;
      }
  }
  hwy::SetSupportedTargetsForTest(0);
  std::printf("  %zu targets, %zu vectors each\n", targets.size(), want.size());
}

TEST(KvCodes, AVectorWithAValueThatIsNotFiniteDecodesToNaN) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()})
    for (int64_t at : {0, 5, 63}) {
      std::vector<float> x = normalValues(64, 3);
      x[static_cast<size_t>(at)] = bad;
      std::vector<uint8_t> q(64, 7);
      const CodeRange range = codeValues(x.data(), 64, 8, q.data());
      EXPECT_TRUE(std::isnan(halfToFloat(range.scale) * q[1] + halfToFloat(range.offset))) << bad << " at " << at;
      EXPECT_EQ(q, std::vector<uint8_t>(64, 0));
    }
}
