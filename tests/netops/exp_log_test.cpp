// gz_exp and gz_log, the exp and log the host and the GPU kernels share (src/netops/exp_log.inc),
// against the C library in f64: within 2 units in the last place over their whole range (measured:
// exp 1.0, log 0.76), with the special values IEEE gives.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "netops/exp_log.h"

using gizml::netops::detail::gz_exp;
using gizml::netops::detail::gz_log;

namespace {

// The distance in f32 steps between got and the f64 truth (rounded to f32).
double ulps(float got, double truth) {
  const float want = static_cast<float>(truth);
  if (got == want) return 0.0;
  const double step = std::fabs(std::nextafter(want, std::numeric_limits<float>::infinity()) - want);
  return std::fabs(static_cast<double>(got) - truth) / (step > 0 ? step : std::numeric_limits<float>::denorm_min());
}

TEST(ExpLog, ExpIsWithinTwoUlpsEverywhere) {
  double worst = 0.0;
  // Every 1009th f32 pattern, both signs, inside (-104, 88.7).
  for (uint32_t bits = 0; bits < 0x80000000u; bits += 1009)
    for (float sign : {1.0f, -1.0f}) {
      const float x = sign * std::bit_cast<float>(bits);
      if (!(x > -104.0f && x < 88.7f)) continue;
      worst = std::max(worst, ulps(gz_exp(x), std::exp(static_cast<double>(x))));
    }
  EXPECT_LE(worst, 2.0);
  ::testing::Test::RecordProperty("worst_ulps", std::to_string(worst));
  EXPECT_EQ(gz_exp(0.0f), 1.0f);
  EXPECT_EQ(gz_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(gz_exp(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_EQ(gz_exp(89.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(gz_exp(-104.0f), 0.0f);
  EXPECT_TRUE(std::isnan(gz_exp(std::numeric_limits<float>::quiet_NaN())));
}

TEST(ExpLog, LogIsWithinTwoUlpsEverywhere) {
  double worst = 0.0;
  for (uint32_t bits = 1; bits < 0x7f800000u; bits += 1009) {
    const float x = std::bit_cast<float>(bits);
    worst = std::max(worst, ulps(gz_log(x), std::log(static_cast<double>(x))));
  }
  EXPECT_LE(worst, 2.0);
  ::testing::Test::RecordProperty("worst_ulps", std::to_string(worst));
  EXPECT_EQ(gz_log(1.0f), 0.0f);
  EXPECT_EQ(gz_log(0.0f), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(gz_log(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(gz_log(-1.0f)));
  EXPECT_TRUE(std::isnan(gz_log(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
