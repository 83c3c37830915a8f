// cpu/layer_rows.h's RoPE and RMS norm. ropeRows keeps the angles of the tables it made last (a
// pass's, a batch's decode rows'): a rotation must not depend on which tables came before it (a
// kept table is the one computed afresh, and a table is known by its frequencies, not its
// address), and must match the rotation by explicit positions, which never uses the kept tables.
// rmsNormRows against the formula in double.
#include "cpu/layer_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

using namespace gizml::cpu;

namespace {

constexpr int64_t kHeads = 3, kKvHeads = 1, kHeadDim = 16, kHalf = 8;

std::vector<float> randomValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<float> frequencies(double base) {
  std::vector<float> f(kHalf);
  for (int64_t i = 0; i < kHalf; ++i) f[static_cast<size_t>(i)] = static_cast<float>(std::pow(base, -double(i) / kHalf));
  return f;
}

struct Rotated {
  std::vector<float> q, k;
};

// Rows [start, start + rows) of the same q and k turned by invFreq, through the kept tables or
// (byPosition) through explicit positions.
Rotated rotate(const std::vector<float>& invFreq, int64_t start, int64_t rows, bool byPosition) {
  Rotated r{randomValues(static_cast<size_t>(rows * kHeads * kHeadDim), 1),
            randomValues(static_cast<size_t>(rows * kKvHeads * kHeadDim), 2)};
  std::vector<int32_t> positions;
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t i = 0; i < kHalf; ++i) positions.push_back(static_cast<int32_t>(start + row));
  ropeRows(r.q.data(), kHeads, r.k.data(), kKvHeads, rows, kHeadDim, invFreq.data(), kHalf, start,
           byPosition ? positions.data() : nullptr);
  return r;
}

}  // namespace

TEST(RopeRows, ARotationDoesNotDependOnTheTablesBeforeIt) {
  const std::vector<float> a = frequencies(10000.0), b = frequencies(1000000.0), c = frequencies(500.0);
  // The same frequencies at another address are the same table.
  const std::vector<float> aCopy = a;
  struct Call {
    const std::vector<float>* invFreq;
    int64_t start, rows;
  };
  const Call calls[] = {{&a, 7, 1}, {&b, 7, 1}, {&a, 7, 1}, {&c, 7, 1}, {&aCopy, 7, 1}, {&b, 7, 1},
                        {&a, 8, 1}, {&a, 0, 5}, {&b, 0, 5}, {&c, 0, 5}, {&a, 0, 5},  {&a, 0, 4}};
  for (const Call& call : calls) {
    const Rotated kept = rotate(*call.invFreq, call.start, call.rows, false);
    const Rotated direct = rotate(*call.invFreq, call.start, call.rows, true);
    EXPECT_EQ(kept.q, direct.q) << "start " << call.start << ", " << call.rows << " rows";
    EXPECT_EQ(kept.k, direct.k) << "start " << call.start << ", " << call.rows << " rows";
  }
  // A batch's sequences at their own positions, more of them than the tables kept, two tables.
  for (int round = 0; round < 2; ++round)
    for (int64_t start = 0; start < 40; ++start)
      for (const std::vector<float>* invFreq : {&a, &b}) {
        const Rotated kept = rotate(*invFreq, start * 3, 1, false);
        const Rotated direct = rotate(*invFreq, start * 3, 1, true);
        ASSERT_EQ(kept.q, direct.q) << "round " << round << ", start " << start * 3;
        ASSERT_EQ(kept.k, direct.k) << "round " << round << ", start " << start * 3;
      }
  // And the turn itself: pair (0, half) of the first head at position 7 by 7 * invFreq[0].
  const Rotated r = rotate(a, 7, 1, false);
  const std::vector<float> q = randomValues(static_cast<size_t>(kHeads * kHeadDim), 1);
  const double angle = 7.0 * a[0];
  EXPECT_NEAR(r.q[0], q[0] * std::cos(angle) - q[kHalf] * std::sin(angle), 1e-5);
  EXPECT_NEAR(r.q[kHalf], q[kHalf] * std::cos(angle) + q[0] * std::sin(angle), 1e-5);
}

TEST(RmsNormRows, EachRowOverItsRootMeanSquareTimesTheWeights) {
  const int64_t rows = 3, dim = 577;  // not a whole number of vectors
  const std::vector<float> x = randomValues(static_cast<size_t>(rows * dim), 3), w = randomValues(static_cast<size_t>(dim), 4);
  std::vector<float> out(x.size());
  rmsNormRows(x.data(), rows, dim, w.data(), 1e-6f, out.data());
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t i = 0; i < dim; ++i) sum += double(x[size_t(r * dim + i)]) * x[size_t(r * dim + i)];
    const double inv = 1.0 / std::sqrt(sum / dim + 1e-6);
    for (int64_t i = 0; i < dim; ++i)
      ASSERT_NEAR(out[size_t(r * dim + i)], x[size_t(r * dim + i)] * inv * w[size_t(i)], 2e-6 * std::fabs(x[size_t(r * dim + i)] * inv * w[size_t(i)]) + 1e-7)
          << "row " << r << ", " << i;
  }
}
