// cpu/float_panels.h: the few-rows panel kernels (portable, AVX2, AVX-512, each one this CPU runs)
// give, bit for bit, what sgemm gives for the same product (the widened weights as B), at every
// row count 1..4 and every group of 1..4 panels a call, with a depth past sgemm's first k block
// (and not a multiple of 8), a last panel narrower than 16, and F32, F16 and BF16 weights; and
// floatPanelsMatmul does at 1..4 rows (the grouped panel path) and at 9 (the sgemm path).
#include "cpu/float_panels.h"

#include <gizml/dtype.h>
#include <gizml/error.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <random>
#include <vector>

#include "cpu/convert.h"
#include "cpu/gemm.h"

using namespace gizml;

namespace {

struct Case {
  int64_t rows = 0, cols = 0;
  std::vector<float> x, values;  // activations [64, cols]; the stored weights' values [rows, cols]
  std::vector<uint8_t> stored;
  core::PageVector<uint8_t> panels;
};

Case makeCase(DType t, int64_t rows, int64_t cols, unsigned seed) {
  Case c;
  c.rows = rows;
  c.cols = cols;
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  c.x.resize(static_cast<size_t>(64 * cols));
  for (float& v : w) v = dist(rng);
  for (float& v : c.x) v = dist(rng);
  c.stored.resize(w.size() * dtypeSize(t));
  cpu::storeF32(t, w.data(), static_cast<int64_t>(w.size()), c.stored.data());
  c.values.resize(w.size());
  cpu::loadF32(t, c.stored.data(), 1, static_cast<int64_t>(w.size()), c.values.data());
  c.panels = cpu::packFloatPanels(t, c.stored.data(), rows, cols);
  return c;
}

std::vector<float> sgemmOf(const Case& c, int64_t m) {
  std::vector<float> want(static_cast<size_t>(m * c.rows));
  cpu::sgemm(m, c.rows, c.cols, c.x.data(), c.cols, 1, c.values.data(), 1, c.cols, want.data(), c.rows, false);
  return want;
}

}  // namespace

TEST(FloatPanels, EveryKernelGivesSgemmsBits) {
  const int64_t rows = 5 * cpu::kFloatPanelRows + 5, cols = 2 * cpu::kGemmKc + 37;  // six panels, the last of 5 rows
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    const Case c = makeCase(t, rows, cols, 5);
    const int64_t panelBytes = cols * cpu::kFloatPanelRows * static_cast<int64_t>(dtypeSize(t));
    const int64_t panels = (rows + cpu::kFloatPanelRows - 1) / cpu::kFloatPanelRows;
    for (auto kernel : {cpu::FloatPanelKernel::Portable, cpu::FloatPanelKernel::Avx2, cpu::FloatPanelKernel::Avx512}) {
      if (!cpu::floatPanelKernelRuns(kernel)) {
        std::cout << "[ SKIPPED  ] the " << cpu::floatPanelKernelName(kernel) << " kernel: this CPU does not run it\n";
        continue;
      }
      for (int64_t m = 1; m <= 4; ++m) {
        const std::vector<float> want = sgemmOf(c, m);
        for (int64_t group = 1; group <= cpu::kFloatPanelGroup; ++group) {
          std::vector<float> got(want.size(), -1.0f);
          for (int64_t p = 0; p < panels; p += group) {
            const int64_t count = std::min(group, panels - p), first = p * cpu::kFloatPanelRows;
            cpu::floatPanelProduct(kernel, t, c.panels.data() + p * panelBytes, count, cols, c.x.data(), cols, m,
                                   got.data() + first, rows, std::min(count * cpu::kFloatPanelRows, rows - first));
          }
          EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
              << cpu::floatPanelKernelName(kernel) << ", " << dtypeName(t) << ", " << m << " rows, " << group << " panels a call";
        }
      }
    }
  }
}

TEST(FloatPanels, MatmulGivesSgemmsBitsAtEveryRowCount) {
  const int64_t rows = 9 * cpu::kFloatPanelRows + 3, cols = cpu::kGemmKc + 11;
  for (DType t : {DType::F16, DType::BF16}) {
    const Case c = makeCase(t, rows, cols, 7);
    for (int64_t m : {1, 2, 3, 4, 9}) {
      const std::vector<float> want = sgemmOf(c, m);
      std::vector<float> got(want.size(), -1.0f);
      cpu::floatPanelsMatmul(t, c.panels.data(), rows, cols, c.x.data(), m, got.data());
      const auto first = std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin();
      EXPECT_EQ(first, static_cast<int64_t>(got.size())) << dtypeName(t) << ", " << m << " rows: first difference at " << first;
    }
  }
}

// Wide enough that sgemm splits the columns over the threads and into blocks of kNc, which pack
// the panels (with tiles of 8 or 2 columns, from inside a panel) and pad past the last row.
TEST(FloatPanels, WideMatmulGivesSgemmsBits) {
  const int64_t rows = 2100, cols = 300, m = 40;
  for (DType t : {DType::F16, DType::BF16}) {
    const Case c = makeCase(t, rows, cols, 11);
    const std::vector<float> want = sgemmOf(c, m);
    std::vector<float> got(want.size(), -1.0f);
    cpu::floatPanelsMatmul(t, c.panels.data(), rows, cols, c.x.data(), m, got.data());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << dtypeName(t);
  }
}

TEST(FloatPanels, BadCallsAreErrors) {
  const Case c = makeCase(DType::F16, 16, 8, 1);
  float y[16 * 4];
  EXPECT_THROW(cpu::floatPanelProduct(DType::F16, c.panels.data(), 5, 8, c.x.data(), 8, 1, y, 16, 16), Error);
  EXPECT_THROW(cpu::floatPanelProduct(DType::F16, c.panels.data(), 1, 8, c.x.data(), 8, 5, y, 16, 16), Error);
  EXPECT_THROW(cpu::floatPanelProduct(DType::F16, c.panels.data(), 1, 8, c.x.data(), 8, 1, y, 16, 17), Error);
}
