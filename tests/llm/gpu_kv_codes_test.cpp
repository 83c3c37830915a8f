// Keys and values in codes of 8, 4 or 2 bits on a GPU (llm/ops/gpu/kv_codes.cu.inc): the GPU stores
// the codes and ranges the CPU stores (cpu/kv_codes.h: the least-squares range by Lloyd's iteration,
// after a Hadamard rotation of each head where headDim is a power of two), bit for bit, in the same
// layout, and attends over them as the CPU does up to f32 rounding; the tiny models' logits with a
// coded cache on the GPU against the CPU's with the same cache. On the first GPU, in CI the host
// GPU emulator (ctest emulator_test_llm); skipped where there is none.
#include <gizml/dtype.h>
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/gpu_checks.h"
#include "llm/language_model.h"
#include "llm/ops/attention.h"
#include "llm/ops/kv_cache.h"
#include "llm/ops/kv_pool.h"
#include "model_reference.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

constexpr int64_t kPage = ops::KvPool::kPageTokens;
constexpr int64_t kRows = 300, kKvHeads = 2, kHeads = 4;

// One layer's keys and values after a store, read back to the host, and the attention's context.
struct Stored {
  std::vector<uint8_t> keys, values;
  std::vector<uint16_t> keyRanges, valueRanges;
  std::vector<float> context;
  std::vector<int32_t> pages;
};

template <class T>
std::vector<T> bytesOf(const tensor::Tensor& t) {
  const tensor::Tensor host = t.host();
  const T* p = host.data<T>();
  return std::vector<T>(p, p + dtypeBytes(host.dtype(), host.numel()) / sizeof(T));
}

// Random rows with what tests a coder: a constant head, an outlier, and a NaN in the last row.
std::vector<float> sideRows(int64_t headDim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> x(static_cast<size_t>(kRows * kKvHeads * headDim));
  for (float& v : x) v = normal(rng);
  const auto at = [&](int64_t row, int64_t head, int64_t d) -> float& {
    return x[static_cast<size_t>((row * kKvHeads + head) * headDim + d)];
  };
  for (int64_t d = 0; d < headDim; ++d) at(5, 1, d) = 0.75f;
  at(11, 0, 3) = 100.0f;
  at(kRows - 1, 0, 1) = std::numeric_limits<float>::quiet_NaN();
  return x;
}

// Stores kRows rows of keys and values in three passes (a prompt's part, the rest, a decode step:
// passes that share a key column's byte) into one layer in `format`, attending as it goes.
Stored storeAndAttend(const std::string& format, int64_t headDim, const std::optional<gizhw::gpu::Gpu>& gpu) {
  static const int owner = 0;
  auto pool = std::make_shared<ops::KvPool>(&owner, std::vector<bool>{true}, kKvHeads, headDim,
                                            KvFormat::parse(format), 2,
                                            std::vector<std::optional<gizhw::gpu::Gpu>>{gpu});
  ops::KvCache cache(pool, kRows);
  const auto place = [&](const std::vector<float>& v, int64_t width) {
    const tensor::Tensor t = tensor::tensor({kRows, width}, std::vector<double>(v.begin(), v.end()));
    return gpu ? t.on(*gpu) : t;
  };
  const tensor::Tensor keys = place(sideRows(headDim, 1), kKvHeads * headDim);
  const tensor::Tensor values = place(sideRows(headDim, 2), kKvHeads * headDim);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> qRows(static_cast<size_t>(kRows * kHeads * headDim));
  for (float& v : qRows) v = normal(rng);
  const tensor::Tensor q = place(qRows, kHeads * headDim);
  const tensor::Tensor context = place(std::vector<float>(qRows.size(), 0.0f), kHeads * headDim);
  const ops::AttentionShape shape{kHeads * headDim, kHeads, kKvHeads, headDim, 1.0f / std::sqrt(float(headDim))};
  for (auto [from, to] : {std::pair<int64_t, int64_t>{0, 201}, {201, kRows - 1}, {kRows - 1, kRows}}) {
    ops::cachedAttention({{&cache, from, q.slice(0, from, to), context.slice(0, from, to), 0,
                           keys.slice(0, from, to), values.slice(0, from, to)}},
                         0, shape);
    cache.setLength(to);
  }
  const ops::KvPool::Layer& layer = pool->layer(0);
  Stored out{bytesOf<uint8_t>(layer.keys.data), bytesOf<uint8_t>(layer.values.data), {}, {}, context.toFloats(),
             cache.pages()};
  if (layer.keys.ranges.numel() > 0) out.keyRanges = bytesOf<uint16_t>(layer.keys.ranges);
  if (layer.values.ranges.numel() > 0) out.valueRanges = bytesOf<uint16_t>(layer.values.ranges);
  return out;
}

// Code `index` of `bits` bits in the packed row at `row`.
unsigned codeAt(const uint8_t* row, int64_t index, int bits) {
  const int64_t bit = index * bits;
  return (row[bit / 8] >> (bit % 8)) & ((1u << bits) - 1u);
}

class GpuModelKvCodes : public test::GpuTest,
                        public ::testing::WithParamInterface<std::tuple<std::string, int64_t>> {};

TEST_P(GpuModelKvCodes, StoresTheCpusCodesAndAttendsAsItDoes) {
  const auto [format, headDim] = GetParam();
  const Stored cpu = storeAndAttend(format, headDim, std::nullopt), got = storeAndAttend(format, headDim, gpu());
  ASSERT_EQ(got.pages, cpu.pages);
  const KvFormat f = KvFormat::parse(format);
  const int keyBits = ops::codeBits(f.keys), valueBits = ops::codeBits(f.values);
  const int64_t keyRow = keyBits > 0 ? kPage * keyBits / 8 : kPage * 2;
  const int64_t valueRow = valueBits > 0 ? (headDim * valueBits + 7) / 8 : headDim * 2;
  int64_t differing = 0, checked = 0;
  for (int64_t p = 0; p < kRows; ++p) {
    const int64_t page = cpu.pages[static_cast<size_t>(p / kPage)], t = p % kPage;
    for (int64_t h = 0; h < kKvHeads; ++h) {
      const int64_t place = (page * kKvHeads + h) * kPage + t;
      for (int64_t d = 0; d < headDim; ++d, ++checked) {
        const int64_t column = ((page * kKvHeads + h) * headDim + d) * keyRow;
        if (keyBits > 0) {
          differing += codeAt(&got.keys[column], t, keyBits) != codeAt(&cpu.keys[column], t, keyBits);
        } else {
          differing += std::memcmp(&got.keys[column + t * 2], &cpu.keys[column + t * 2], 2) != 0;
        }
        if (valueBits > 0) {
          differing += codeAt(&got.values[place * valueRow], d, valueBits) != codeAt(&cpu.values[place * valueRow], d, valueBits);
        } else {
          differing += std::memcmp(&got.values[place * valueRow + d * 2], &cpu.values[place * valueRow + d * 2], 2) != 0;
        }
      }
      for (int k = 0; k < 2; ++k) {
        if (keyBits > 0) differing += got.keyRanges[place * 2 + k] != cpu.keyRanges[place * 2 + k];
        if (valueBits > 0) differing += got.valueRanges[place * 2 + k] != cpu.valueRanges[place * 2 + k];
      }
    }
  }
  EXPECT_EQ(differing, 0) << "of " << checked << " positions' codes and their ranges";
  // The last row read a NaN (head 0's group): NaN on both; elsewhere f32 rounding.
  ASSERT_EQ(got.context.size(), cpu.context.size());
  float range = 0, error = 0;
  for (size_t i = 0; i < cpu.context.size(); ++i) {
    ASSERT_EQ(std::isnan(got.context[i]), std::isnan(cpu.context[i])) << "context value " << i;
    if (std::isnan(cpu.context[i])) continue;
    range = std::max(range, std::fabs(cpu.context[i]));
    error = std::max(error, std::fabs(got.context[i] - cpu.context[i]));
  }
  std::printf("KV %s, heads of %lld: max context error %.2e of the range %.2f against the CPU\n", format.c_str(),
              static_cast<long long>(headDim), error / range, range);
  EXPECT_LT(error, 1e-5f * range);
}

// Heads of 64 and 256 (rotated; 256: two values a thread) and 48 (not a power of two: coded as
// they are); keys and values apart, and coded keys or values beside 16-bit elements.
INSTANTIATE_TEST_SUITE_P(Formats, GpuModelKvCodes,
                         ::testing::Combine(::testing::Values("8", "4", "2", "4/2", "8/16", "16/4"),
                                            ::testing::Values(int64_t{64}, int64_t{48}, int64_t{256})));

}  // namespace
