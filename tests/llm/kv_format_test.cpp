// KvFormat (gizml/kv_format.h): its text forms and their mistakes, and models whose keys and
// values are codes: logits near those of an F32 cache, nearer the more bits, on every
// architecture family of the tiny fixtures (Gemma's heads and Qwen 3.5's hybrid layers included),
// 8 bits as near as F16's.
#include <gizml/kv_format.h>
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model_reference.h"

namespace {

TEST(KvFormat, TextFormsReadBack) {
  using Store = KvFormat::Store;
  EXPECT_EQ(KvFormat::parse("8"), KvFormat(Store::Bits8, Store::Bits8));
  EXPECT_EQ(KvFormat::parse("4/2"), KvFormat(Store::Bits4, Store::Bits2));
  EXPECT_EQ(KvFormat::parse("16"), KvFormat(DType::F16));
  EXPECT_EQ(KvFormat::parse("16/8"), KvFormat(Store::F16, Store::Bits8));
  EXPECT_EQ(KvFormat::parse("bf16"), KvFormat(DType::BF16));
  for (const char* text : {"f32", "16", "bf16", "8", "4", "2", "4/2", "16/8", "8/f32"})
    EXPECT_EQ(KvFormat::parse(text).text(), text);
  for (const char* bad : {"", "3", "8/", "/4", "4/2/2", "q8_0", "16 ", "F16"})
    expectError([&] { KvFormat::parse(bad); }, {"kv: '" + std::string(bad) + "' is not a format"});
  expectError([] { KvFormat{DType::I8}; }, {"F32, F16 or BF16 elements, not i8"});
  // The engine's setting: those forms, or "auto" (the engine chooses).
  EXPECT_FALSE(KvFormat::parseSetting("auto").has_value());
  EXPECT_EQ(KvFormat::parseSetting("4/2"), KvFormat::parse("4/2"));
  expectError([] { KvFormat::parseSetting("Auto"); }, {"kv: 'Auto' is not a format"});
}

// The RMS difference of the logits (every prompt row, then decode steps) from the F32 cache's,
// over their RMS.
double logitsError(const std::string& folder, const std::string& format, const std::vector<TokenId>& prompt) {
  Sequences f32(folder, 1, 64), coded(folder, 1, 64, KvFormat::parse(format));
  std::vector<float> want = f32.forward({prompt}, true)[0].toFloats(), got = coded.forward({prompt}, true)[0].toFloats();
  for (TokenId t : {3, 17, 5}) {  // decode steps too
    const std::vector<float> a = f32.forward({{t}})[0].toFloats(), b = coded.forward({{t}})[0].toFloats();
    want.insert(want.end(), a.begin(), a.end());
    got.insert(got.end(), b.begin(), b.end());
  }
  double error = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    error += std::pow(static_cast<double>(got[i]) - want[i], 2);
    scale += std::pow(static_cast<double>(want[i]), 2);
  }
  return std::sqrt(error / scale);
}

TEST(KvFormat, CodedCachesGiveTheLogitsOfF32ToTheirBits) {
  const std::vector<TokenId> prompt = {1, 5, 9, 2, 7, 3, 11, 4, 8, 6, 10, 12, 13, 2, 9, 1, 5, 14, 3, 7};
  for (const char* arch : {"llama", "gemma3", "qwen3_5"}) {
    const std::string folder = converted(arch, 8).folder();
    const double e8 = logitsError(folder, "8", prompt), e4 = logitsError(folder, "4", prompt),
                 e2 = logitsError(folder, "2", prompt), e16 = logitsError(folder, "16", prompt);
    std::printf("  %s: RMS logit error over the RMS logit: 16 %.2g, 8 %.2g, 4 %.2g, 2 %.2g\n", arch, e16, e8,
                e4, e2);
    // 8 bits as near as an F16 cache (within twice its error: these random tiny models magnify
    // every rounding), and each narrower code farther.
    EXPECT_LT(e8, 2 * e16) << arch;
    EXPECT_LT(e8, e4) << arch;
    EXPECT_LT(e4, e2) << arch;
  }
}

}  // namespace
