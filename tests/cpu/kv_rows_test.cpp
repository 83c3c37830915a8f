// Attention's stored-row kernels (cpu/kv_rows.h) against double sums over the same stored
// values, for F32, F16 and BF16 rows and lengths with every tail (n mod 16 from 0 to 15).
#include "cpu/kv_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace gizml;

namespace {

struct Row {
  std::vector<uint8_t> bytes;
  std::vector<double> values;  // what the stored bytes decode to
};

Row storeRow(DType t, const std::vector<float>& v) {
  Row r;
  r.bytes.resize(v.size() * dtypeSize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::F32) {
      std::memcpy(r.bytes.data() + 4 * i, &v[i], 4);
      r.values.push_back(v[i]);
    } else {
      const uint16_t h = t == DType::F16 ? floatToHalf(v[i]) : floatToBf16(v[i]);
      std::memcpy(r.bytes.data() + 2 * i, &h, 2);
      r.values.push_back(t == DType::F16 ? halfToFloat(h) : bf16ToFloat(h));
    }
  }
  return r;
}

}  // namespace

TEST(KvRows, DotAndScaledSumMatchDoubleOnEveryTail) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int64_t n : {1, 7, 8, 15, 16, 17, 31, 64, 128, 135}) {
      std::vector<float> stored(static_cast<size_t>(n)), x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
      for (auto* v : {&stored, &x, &y})
        for (float& f : *v) f = dist(rng);
      const Row row = storeRow(t, stored);
      double want = 0, magnitude = 0;
      for (int64_t i = 0; i < n; ++i) {
        want += row.values[static_cast<size_t>(i)] * x[static_cast<size_t>(i)];
        magnitude += std::fabs(row.values[static_cast<size_t>(i)] * x[static_cast<size_t>(i)]);
      }
      SCOPED_TRACE(std::string(dtypeName(t)) + " n=" + std::to_string(n));
      EXPECT_NEAR(cpu::dotStoredRow(t, row.bytes.data(), x.data(), n), want, 1e-6 * magnitude);
      std::vector<float> sum = y;
      cpu::addScaledStoredRow(t, row.bytes.data(), -0.75f, sum.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double w = y[static_cast<size_t>(i)] - 0.75 * row.values[static_cast<size_t>(i)];
        EXPECT_NEAR(sum[static_cast<size_t>(i)], w, 1e-6 * (std::fabs(w) + 1));
      }
    }
}
