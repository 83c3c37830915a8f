// The group search's inner loops: the AVX2 and portable bodies give the same bits (so a
// conversion does not depend on the CPU), and both equal a plain double computation of the
// same codes within f32 rounding.
#include "llm/quant/group_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/cpu_features.h"

using namespace gizml::llm::group_search;

namespace {

struct Case {
  std::vector<float> x;
  float lo, iscale, s, z, nmax;
};

std::vector<Case> cases() {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<Case> out;
  for (int bits : {2, 3, 4, 6, 8})
    for (int64_t n : {8, 32, 64, 256}) {
      Case c;
      for (int64_t i = 0; i < n; ++i) c.x.push_back(normal(rng));
      float hi = c.x[0];
      c.lo = c.x[0];
      for (float v : c.x) c.lo = std::min(c.lo, v), hi = std::max(hi, v);
      c.nmax = static_cast<float>((1 << bits) - 1);
      c.iscale = (c.nmax - 0.5f) / (hi - c.lo);
      c.s = (hi - c.lo) / c.nmax;
      c.z = std::floor(-c.lo / c.s);
      if (n == 64) c.x[5] = std::nanf("");  // NaN: code 0 on both bodies
      out.push_back(c);
    }
  return out;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

TEST(GroupSearch, Avx2AndPortableGiveTheSameBits) {
  if (!gizml::cpu::cpuFeatures().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  for (const Case& c : cases()) {
    const auto n = static_cast<int64_t>(c.x.size());
    const FitSums a = fitSumsAvx2(c.x.data(), n, c.lo, c.iscale, c.nmax);
    const FitSums p = fitSumsPortable(c.x.data(), n, c.lo, c.iscale, c.nmax);
    EXPECT_EQ(bits(a.sl), bits(p.sl)) << n;
    EXPECT_EQ(bits(a.sl2), bits(p.sl2)) << n;
    EXPECT_EQ(std::isnan(a.sxl), std::isnan(p.sxl)) << n;
    if (!std::isnan(a.sxl)) {
      EXPECT_EQ(a.sxl, p.sxl) << n;
    }
    const float ea = squaredErrorAvx2(c.x.data(), n, c.s, 1.0f / c.s, c.z, c.nmax);
    const float ep = squaredErrorPortable(c.x.data(), n, c.s, 1.0f / c.s, c.z, c.nmax);
    EXPECT_TRUE(bits(ea) == bits(ep) || (std::isnan(ea) && std::isnan(ep))) << n;
  }
}

TEST(GroupSearch, SumsAndErrorMatchDouble) {
  for (const Case& c : cases()) {
    if (std::isnan(c.x[5])) continue;
    const auto n = static_cast<int64_t>(c.x.size());
    double sl = 0, sl2 = 0, sxl = 0, err = 0;
    for (float v : c.x) {
      const double l = std::clamp(std::floor(static_cast<double>((v - c.lo) * c.iscale + 0.5f)), 0.0, double(c.nmax));
      sl += l, sl2 += l * l, sxl += l * v;
      const double q = std::clamp(std::floor(static_cast<double>(v * (1.0f / c.s) + c.z + 0.5f)), 0.0, double(c.nmax));
      const double d = c.s * (q - c.z) - v;
      err += d * d;
    }
    const FitSums f = fitSums(c.x.data(), n, c.lo, c.iscale, c.nmax);
    EXPECT_EQ(f.sl, sl) << n;    // integers: exact
    EXPECT_EQ(f.sl2, sl2) << n;  // below 2^24: exact
    EXPECT_NEAR(f.sxl, sxl, 1e-6 * std::abs(sxl) + 1e-12) << n;
    EXPECT_NEAR(squaredError(c.x.data(), n, c.s, 1.0f / c.s, c.z, c.nmax), err, 1e-5 * err + 1e-12) << n;
  }
}
