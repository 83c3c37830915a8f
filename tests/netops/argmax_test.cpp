// netops::argmax on rows as long as a language model's vocabulary, where it searches chunk by
// chunk: against Tensor.argmax (numpy's argmax in tests/tensor's fixtures) on the same rows with
// every NaN made -inf (netops::argmax passes NaN over), ties across chunks included.
#include <gizml/netops.h>
#include <gizml/tensor.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace T = gizml::tensor;
namespace N = gizml::netops;

namespace {

constexpr int64_t kWidth = 3 * 4096 + 77;  // the search's chunks are 4,096 values
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

std::vector<double> row(int kind) {
  std::vector<double> r(kWidth);
  for (int64_t i = 0; i < kWidth; ++i) {
    switch (kind) {
      case 0: r[i] = static_cast<double>((i * 7919) % 5003); break;          // ties in several chunks: the first wins
      case 1: r[i] = static_cast<double>(i % 4096) * (i < 4096 ? -1 : 1); break;  // rising within chunks
      case 2: r[i] = static_cast<double>(i); break;                           // a new maximum each value
      default: r[i] = i == 0 ? 1e6 : static_cast<double>(i % 977);            // the first value the largest
    }
  }
  return r;
}

int64_t reference(std::vector<double> r) {
  for (double& v : r)
    if (std::isnan(v)) v = -std::numeric_limits<double>::infinity();
  return T::tensor({kWidth}, r).argmax(0).toInts()[0];
}

}  // namespace

TEST(NetopsArgmax, LongRowsAsTensorArgmaxWithNaNPassedOver) {
  std::vector<std::vector<double>> rows;
  for (int kind = 0; kind < 4; ++kind) rows.push_back(row(kind));
  // NaN in the first chunk, at a maximum, and at a chunk's start.
  std::vector<double> withNan = row(0);
  for (int64_t i = 0; i < kWidth; i += 613) withNan[i] = kNan;
  for (int64_t i = 0; i < kWidth; ++i)
    if (withNan[i] == 5002.0) {
      withNan[i] = kNan;  // the first maximum: the next one wins
      break;
    }
  withNan[4096] = kNan;
  rows.push_back(withNan);
  std::vector<double> values;
  for (const auto& r : rows) values.insert(values.end(), r.begin(), r.end());
  const std::vector<int64_t> got = N::argmax(T::tensor({static_cast<int64_t>(rows.size()), kWidth}, values));
  ASSERT_EQ(got.size(), rows.size());
  for (size_t r = 0; r < rows.size(); ++r) EXPECT_EQ(got[r], reference(rows[r])) << "row " << r;
  EXPECT_EQ(got[1], 8191);  // chunk 1's last value, tied by chunk 2's
  EXPECT_EQ(got[2], kWidth - 1);
  EXPECT_EQ(got[3], 0);
}

TEST(NetopsArgmax, ARowOfNaNsGivesZeroAndNaNBeforeTheMaximumNeverWins) {
  std::vector<double> nans(kWidth, kNan);
  EXPECT_EQ(N::argmax(T::tensor({1, kWidth}, nans)), std::vector<int64_t>{0});
  nans[kWidth - 1] = -1e30;  // one number among the NaNs, in the last chunk
  EXPECT_EQ(N::argmax(T::tensor({1, kWidth}, nans)), std::vector<int64_t>{kWidth - 1});
  nans[5000] = -std::numeric_limits<double>::infinity();  // -inf is a number too
  EXPECT_EQ(N::argmax(T::tensor({1, kWidth}, nans)), std::vector<int64_t>{kWidth - 1});
  std::vector<double> infs(kWidth, kNan);
  infs[9000] = infs[10000] = -std::numeric_limits<double>::infinity();
  EXPECT_EQ(N::argmax(T::tensor({1, kWidth}, infs)), std::vector<int64_t>{9000});
}
