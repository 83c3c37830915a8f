// cpu/float_panels.h: the few-rows panel kernel gives, bit for bit, what sgemm gives for the same
// product (the widened weights as B), at every row count 1..4, with a depth past sgemm's first k
// block (and not a multiple of 8), a panel narrower than 16, and F32, F16 and BF16 weights.
#include "cpu/float_panels.h"

#include <gizml/dtype.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "cpu/convert.h"
#include "cpu/gemm.h"

using namespace gizml;

TEST(FloatPanels, FewRowsGiveSgemmsBits) {
  const int64_t rows = 21, cols = 2 * cpu::kGemmKc + 37;  // two panels, the second of 5 rows
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(4 * cols));
  for (float& v : w) v = dist(rng);
  for (float& v : x) v = dist(rng);
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    // The weights as stored, and their values back as floats.
    std::vector<uint8_t> stored(w.size() * dtypeSize(t));
    cpu::storeF32(t, w.data(), static_cast<int64_t>(w.size()), stored.data());
    std::vector<float> values(w.size());
    cpu::loadF32(t, stored.data(), 1, static_cast<int64_t>(w.size()), values.data());
    const auto panels = cpu::packFloatPanels(t, stored.data(), rows, cols);
    for (int64_t m = 1; m <= 4; ++m) {
      std::vector<float> want(static_cast<size_t>(m * rows)), got(want.size(), -1.0f);
      cpu::sgemm(m, rows, cols, x.data(), cols, 1, values.data(), 1, cols, want.data(), rows, false);
      for (int64_t p = 0; p * cpu::kFloatPanelRows < rows; ++p) {
        const int64_t first = p * cpu::kFloatPanelRows;
        cpu::floatPanelProduct(t, panels.data() + first * cols * static_cast<int64_t>(dtypeSize(t)), cols, x.data(), cols,
                               m, got.data() + first, rows, std::min(cpu::kFloatPanelRows, rows - first));
      }
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << dtypeName(t) << ", " << m << " rows";
    }
  }
}
