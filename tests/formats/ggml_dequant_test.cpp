// Dequantization against gguf-py's numpy reference (tests/reference/make_gguf_fixtures.py).
#include "llm/quant/ggml_dequant.h"

#include <gizml/error.h>
#include <gtest/gtest.h>

#include <cstring>

#include "file_bytes.h"
#include "common/test_paths.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

class DequantFixture : public ::testing::TestWithParam<GgmlType> {};

TEST_P(DequantFixture, BitIdenticalToGgufPy) {
  const std::string name = ggmlTypeName(static_cast<uint32_t>(GetParam()));
  const std::string base = test_paths::testData() + "/gguf/dequant/" + name;
  const std::vector<uint8_t> blocks = readFileBytes(base + ".bin");
  const std::vector<uint8_t> expectedBytes = readFileBytes(base + ".f32");
  const int64_t count = static_cast<int64_t>(expectedBytes.size() / 4);
  const GgmlTypeTraits& traits = ggmlTraits(GetParam());
  ASSERT_EQ(static_cast<int64_t>(blocks.size()), count / traits.blockSize * traits.typeSize);

  std::vector<float> out(count);
  dequantize(GetParam(), blocks.data(), out.data(), count);
  std::vector<uint32_t> got(count), expected(count);
  std::memcpy(got.data(), out.data(), count * 4);
  std::memcpy(expected.data(), expectedBytes.data(), count * 4);
  for (int64_t i = 0; i < count; ++i) {
    ASSERT_EQ(got[i], expected[i]) << name << " value " << i << ": " << out[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Types, DequantFixture,
                         ::testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::BF16,
                                           GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                                           GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K,
                                           GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                                           GgmlType::Q6_K, GgmlType::Q8_K),
                         [](const auto& info) {
                           return std::string(ggmlTraits(info.param).name);
                         });

// Enough blocks that dequantize splits the work over threads: each copy of the fixture must give
// the fixture's values.
TEST(Dequant, ManyBlocksInParallel) {
  const std::string base = test_paths::testData() + "/gguf/dequant/Q4_K";
  const std::vector<uint8_t> blocks = readFileBytes(base + ".bin");
  const std::vector<uint8_t> expected = readFileBytes(base + ".f32");
  constexpr int kCopies = 1000;
  std::vector<uint8_t> src;
  for (int i = 0; i < kCopies; ++i) src.insert(src.end(), blocks.begin(), blocks.end());
  const int64_t count = static_cast<int64_t>(expected.size() / 4) * kCopies;
  std::vector<float> out(count);
  dequantize(GgmlType::Q4_K, src.data(), out.data(), count);
  for (int i = 0; i < kCopies; ++i) {
    ASSERT_EQ(std::memcmp(out.data() + i * expected.size() / 4, expected.data(), expected.size()), 0)
        << "copy " << i;
  }
}

TEST(Dequant, RejectsPartialBlocksAndUnsupportedTypes) {
  std::vector<uint8_t> src(64);
  std::vector<float> dst(64);
  EXPECT_THROW(dequantize(GgmlType::Q4_0, src.data(), dst.data(), 31), Error);
  EXPECT_THROW(dequantize(GgmlType::IQ2_XXS, src.data(), dst.data(), 256), Error);
  EXPECT_FALSE(canDequantize(GgmlType::Q8_1));
  EXPECT_TRUE(canDequantize(GgmlType::Q6_K));
}

TEST(GgmlTypes, TableMatchesGgufPy) {
  EXPECT_EQ(ggmlTraits(GgmlType::Q4_K).typeSize, 144);
  EXPECT_EQ(ggmlTraits(GgmlType::Q8_K).typeSize, 292);
  EXPECT_EQ(ggmlTraits(GgmlType::Q2_K).typeSize, 84);
  EXPECT_EQ(ggmlTraits(GgmlType::Q3_K).typeSize, 110);
  EXPECT_EQ(ggmlTraits(GgmlType::Q5_K).typeSize, 176);
  EXPECT_EQ(ggmlTraits(GgmlType::Q6_K).typeSize, 210);
  EXPECT_EQ(ggmlTypeTraits(4), nullptr);  // Q4_2, retired
  EXPECT_EQ(ggmlTypeTraits(1000), nullptr);
  EXPECT_EQ(ggmlTypeName(1000), "type 1000");
}

}  // namespace
