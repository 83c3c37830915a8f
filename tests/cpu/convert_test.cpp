// loadF32 of contiguous F16 runs (F16C where the CPU has it) gives what the portable
// halfToFloat gives, for every one of the 65,536 halves and at every run length's tail; storeF32
// to F16 (F16C too) gives floatToHalf's bits, at every rounding edge and for NaN payloads.
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

// Floats at each of the 65,536 upper halves with low halves at F16's rounding edges (13 bits
// dropped: below, at and above the halfway point, ties to odd and even) and all ones.
TEST(StoreF32, HalvesAsThePortableConversion) {
  const uint32_t lows[] = {0x0000, 0x0fff, 0x1000, 0x1001, 0x2000, 0x2fff, 0x3000, 0x3001, 0x5a5a, 0xffff};
  std::vector<float> floats;
  for (uint32_t high = 0; high < 65536; ++high)
    for (const uint32_t low : lows) floats.push_back(std::bit_cast<float>(high << 16 | low));
  std::vector<uint16_t> halves(floats.size());
  gizml::cpu::storeF32(DType::F16, floats.data(), static_cast<int64_t>(floats.size()), halves.data());
  for (size_t i = 0; i < floats.size(); ++i)
    ASSERT_EQ(halves[i], gizml::floatToHalf(floats[i])) << "float 0x" << std::hex << std::bit_cast<uint32_t>(floats[i]);
  // Every run length's tail, and nothing written past it.
  for (int64_t n = 0; n <= 20; ++n) {
    std::vector<uint16_t> run(21, 0xabcd);
    gizml::cpu::storeF32(DType::F16, floats.data() + 4000, n, run.data());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(run[i], gizml::floatToHalf(floats[4000 + i])) << n << " " << i;
    EXPECT_EQ(run[n], 0xabcd) << "wrote past " << n;
  }
}

}  // namespace
