// gizml::diffusion::torchRandn against torch.randn (tests/reference/make_noise_fixtures.py):
// bit for bit, for seeds over and under 2^32 and counts that are multiples of 16, not, and
// under 16 (torch's double path); TorchGenerator's draws in turn from one generator.
#include <gizml/diffusion.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <optional>

#include "common/fixture_file.h"
#include "common/test_paths.h"

using namespace gizml;

namespace {

const std::vector<fixture::Case>& cases() {
  static const std::vector<fixture::Case> all =
      fixture::loadFixtures(test_paths::testData() + "/diffusion/noise.bin");
  return all;
}

// got's bits against the case's "out", the first few differences reported.
void expectTorchBits(const T::Tensor& got, const fixture::Case& c) {
  const fixture::Array& want = c.array("out");
  ASSERT_EQ(want.dtype, static_cast<uint8_t>(DType::F32));
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

TEST(TorchRandn, MatchesTorchBitForBit) {
  int64_t checked = 0;
  for (const fixture::Case& c : cases()) {
    if (c.op != "randn") continue;
    SCOPED_TRACE(c.name);
    expectTorchBits(diffusion::torchRandn(static_cast<uint64_t>(c.attr("seed")), c.array("out").shape), c);
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

// The fixture's chain: one generator's draws in the order written (the double path's cached
// normal carried over a float-path draw).
TEST(TorchGenerator, DrawsInTurnMatchTorch) {
  std::optional<diffusion::TorchGenerator> generator;
  int64_t draws = 0;
  for (const fixture::Case& c : cases()) {
    if (c.op != "randn_next") continue;
    SCOPED_TRACE(c.name);
    ASSERT_EQ(c.attr("draw"), draws);
    if (draws++ == 0) generator.emplace(static_cast<uint64_t>(c.attr("seed")));
    expectTorchBits(generator->randn(c.array("out").shape), c);
  }
  EXPECT_EQ(draws, 6);
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
