// gizml::diffusion::torchRandn against torch.randn (tests/reference/make_noise_fixtures.py):
// bit for bit, for seeds over and under 2^32 and counts that are multiples of 16, not, and
// under 16 (torch's double path).
#include <gizml/diffusion.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstring>

#include "common/fixture_file.h"

using namespace gizml;

namespace {

const std::vector<fixture::Case>& cases() {
  static const std::vector<fixture::Case> all =
      fixture::loadFixtures(std::string(GIZML_TEST_DATA) + "/diffusion/noise.bin");
  return all;
}

TEST(TorchRandn, MatchesTorchBitForBit) {
  ASSERT_FALSE(cases().empty());
  for (const fixture::Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const fixture::Array& want = c.array("out");
    ASSERT_EQ(want.dtype, static_cast<uint8_t>(DType::F32));
    const uint64_t seed = static_cast<uint64_t>(c.attr("seed"));
    const T::Tensor got = diffusion::torchRandn(seed, want.shape);
    ASSERT_EQ(got.dtype(), DType::F32);
    ASSERT_EQ(got.shape(), want.shape);
    ASSERT_TRUE(got.isContiguous());
    const float* g = got.data<float>();
    int64_t mismatches = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      uint32_t w;
      std::memcpy(&w, want.data.data() + 4 * i, 4);
      const uint32_t bits = std::bit_cast<uint32_t>(g[i]);
      if (bits != w && mismatches++ < 3)
        ADD_FAILURE() << "element " << i << ": " << g[i] << " (0x" << std::hex << bits << ") vs torch "
                      << std::bit_cast<float>(w) << " (0x" << w << ")" << std::dec;
    }
    EXPECT_EQ(mismatches, 0) << "of " << want.numel();
  }
}

TEST(TorchRandn, SeedKeepsLow32Bits) {
  const T::Tensor a = diffusion::torchRandn(5, {40}), b = diffusion::torchRandn((uint64_t{7} << 32) + 5, {40});
  EXPECT_EQ(a.toFloats(), b.toFloats());
}

TEST(TorchRandn, EmptyShapeAndBadShape) {
  EXPECT_EQ(diffusion::torchRandn(1, {3, 0}).numel(), 0);
  EXPECT_THROW(diffusion::torchRandn(1, {2, -1}), Error);
}

}  // namespace
