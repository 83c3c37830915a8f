// Attention over the pages on the tensor cores (llm/ops/gpu/attention_mma.cu.inc: a tile of (row,
// query head) pairs of one sequence reads each key and value once; NVIDIA sm_80+, and the host GPU
// emulator, with keys and values each F16 or codes): against the CPU's attention (cpu/kv_attention.h),
// a prompt read in one pass or in two giving each row the same bits, and values or keys that are
// not finite reaching the rows that read them and no others, as on the CPU. Groups of 4 query
// heads a KV head (4 rows a tile), 3 (5 rows of 15 pairs) and 18 (a row in two tiles: 16 heads, 2).
// On the first GPU, in CI the host GPU emulator (ctest emulator_test_llm); skipped where there is none.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/gpu_checks.h"
#include "llm/ops/attention.h"
#include "llm/ops/kv_cache.h"
#include "llm/ops/kv_pool.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

constexpr int64_t kRows = 40, kHeadDim = 64;
constexpr int64_t kInfiniteValueRow = 21, kNanKeyRow = 33;  // both in KV head 0

std::vector<double> normals(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = normal(rng);
  return v;
}

// The context rows of kRows query rows over their own keys and values stored in `format`, read in
// passes that end at `ends`, on `gpu` or the CPU.
std::vector<float> attend(const std::string& format, int64_t heads, int64_t kvHeads, const std::vector<int64_t>& ends,
                          const std::optional<gizhw::gpu::Gpu>& gpu) {
  static const int owner = 0;
  auto pool = std::make_shared<ops::KvPool>(&owner, std::vector<bool>{true}, kvHeads, kHeadDim, KvFormat::parse(format),
                                            1, std::vector<std::optional<gizhw::gpu::Gpu>>{gpu});
  ops::KvCache cache(pool, kRows);
  const auto place = [&](const tensor::Tensor& t) { return gpu ? t.on(*gpu) : t; };
  std::vector<double> k = normals(static_cast<size_t>(kRows * kvHeads * kHeadDim), 1);
  std::vector<double> v = normals(static_cast<size_t>(kRows * kvHeads * kHeadDim), 2);
  v[static_cast<size_t>(kInfiniteValueRow * kvHeads * kHeadDim + 5)] = std::numeric_limits<double>::infinity();
  k[static_cast<size_t>(kNanKeyRow * kvHeads * kHeadDim + 2)] = std::numeric_limits<double>::quiet_NaN();
  const tensor::Tensor keys = place(tensor::tensor({kRows, kvHeads * kHeadDim}, k));
  const tensor::Tensor values = place(tensor::tensor({kRows, kvHeads * kHeadDim}, v));
  const tensor::Tensor q = place(tensor::tensor({kRows, heads * kHeadDim}, normals(static_cast<size_t>(kRows * heads * kHeadDim), 3)));
  const tensor::Tensor context = place(tensor::zeros({kRows, heads * kHeadDim}));
  const ops::AttentionShape shape{heads * kHeadDim, heads, kvHeads, kHeadDim, 1.0f / std::sqrt(float(kHeadDim))};
  int64_t from = 0;
  for (int64_t to : ends) {
    ops::cachedAttention({{&cache, from, q.slice(0, from, to), context.slice(0, from, to), 0, keys.slice(0, from, to),
                           values.slice(0, from, to)}},
                         0, shape);
    cache.setLength(to);
    from = to;
  }
  return context.toFloats();
}

class GpuAttentionTiles : public test::GpuTest,
                          public ::testing::WithParamInterface<std::tuple<std::string, int64_t, int64_t>> {};

TEST_P(GpuAttentionTiles, RowsAttendAsOnTheCpuWhateverTheirPasses) {
  const auto [format, heads, kvHeads] = GetParam();
  const std::vector<float> cpu = attend(format, heads, kvHeads, {kRows}, std::nullopt);
  const std::vector<float> whole = attend(format, heads, kvHeads, {kRows}, gpu());
  // Parts that end just before the infinite value and the NaN key: rows whose tiles in the whole
  // pass held rows that read them.
  const std::vector<float> parts = attend(format, heads, kvHeads, {kInfiniteValueRow, kNanKeyRow, kRows}, gpu());
  ASSERT_EQ(whole.size(), cpu.size());
  float range = 0, error = 0;
  int64_t notFinite = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_EQ(std::isnan(whole[i]), std::isnan(cpu[i])) << "context value " << i << ": " << whole[i] << ", CPU " << cpu[i];
    ASSERT_EQ(std::isinf(whole[i]), std::isinf(cpu[i])) << "context value " << i << ": " << whole[i] << ", CPU " << cpu[i];
    EXPECT_EQ(std::memcmp(&whole[i], &parts[i], sizeof(float)), 0) << "context value " << i << ": " << whole[i]
                                                                    << " whole, " << parts[i] << " in parts";
    if (!std::isfinite(cpu[i])) {
      ++notFinite;
      continue;
    }
    range = std::max(range, std::fabs(cpu[i]));
    error = std::max(error, std::fabs(whole[i] - cpu[i]));
  }
  std::printf("KV %s, %lld heads over %lld: max context error %.2e of the range %.2f against the CPU, %lld values "
              "not finite (on both)\n",
              format.c_str(), static_cast<long long>(heads), static_cast<long long>(kvHeads), error / range, range,
              static_cast<long long>(notFinite));
  EXPECT_GT(notFinite, 0);
  EXPECT_LT(error, 1e-5f * range);
}

// F16 keys and values, codes of 8 bits, and each beside the other.
INSTANTIATE_TEST_SUITE_P(Groups, GpuAttentionTiles,
                         ::testing::Combine(::testing::Values("16", "8", "8/16", "16/8"),
                                            ::testing::Values(int64_t{8}, int64_t{6}, int64_t{18}),
                                            ::testing::Values(int64_t{2})),
                         [](const auto& info) {
                           std::string format = std::get<0>(info.param);
                           std::replace(format.begin(), format.end(), '/', '_');
                           return "kv" + format + "_heads" + std::to_string(std::get<1>(info.param));
                         });

}  // namespace
