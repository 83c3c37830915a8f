// loadF32 of contiguous F16 runs (F16C where the CPU has it) gives what the portable
// halfToFloat gives, for every one of the 65,536 halves and at every run length's tail.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cpu/convert.h"
#include "cpu/cpu_features.h"

namespace {

using gizml::DType;

TEST(LoadF32, ContiguousHalvesAsThePortableConversion) {
  std::vector<uint16_t> halves(65536);
  for (uint32_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<float> widened(halves.size());
  gizml::cpu::loadF32(DType::F16, halves.data(), 1, static_cast<int64_t>(halves.size()), widened.data());
  for (uint32_t i = 0; i < halves.size(); ++i) {
    const float expected = gizml::halfToFloat(halves[i]);
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(widened[i])) << "half 0x" << std::hex << i;
      EXPECT_EQ(std::signbit(widened[i]), std::signbit(expected)) << "half 0x" << std::hex << i;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(widened[i]), std::bit_cast<uint32_t>(expected)) << "half 0x" << std::hex << i;
    }
  }
}

TEST(LoadF32, HalfRunsOfEveryTailLength) {
  std::vector<uint16_t> halves;
  for (int i = 0; i < 40; ++i) halves.push_back(gizml::floatToHalf(0.37f * static_cast<float>(i) - 3.0f));
  for (int64_t n = 0; n <= 40; ++n) {
    std::vector<float> widened(41, -1.0f);
    gizml::cpu::loadF32(DType::F16, halves.data(), 1, n, widened.data());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(widened[i], gizml::halfToFloat(halves[i])) << n << " " << i;
    EXPECT_EQ(widened[n], -1.0f) << "wrote past " << n;  // nothing beyond the run
  }
  // A strided run takes the gathering path.
  std::vector<float> every3(13);
  gizml::cpu::loadF32(DType::F16, halves.data(), 3, 13, every3.data());
  for (int64_t i = 0; i < 13; ++i) EXPECT_EQ(every3[i], gizml::halfToFloat(halves[i * 3]));
  std::printf("F16C %s\n", gizml::cpu::cpuFeatures().f16c ? "used" : "absent (portable path)");
}

}  // namespace
