// prefillAttention (llm/models/prefill_attention.h) against attention written out in double
// precision: grouped-query heads, a prefix already in the cache (start > 0), a row count that
// leaves a partial block, with and without a sliding window.
#include "llm/models/prefill_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace gizml;
using namespace gizml::llm;

namespace {

void expectMatchesReference(int64_t window) {
  const AttentionShape s{.hidden = 0, .heads = 4, .kvHeads = 2, .headDim = 8, .scale = 0.35f, .window = window};
  const int64_t start = 5, rows = 45, total = start + rows, qWidth = s.heads * s.headDim, kvWidth = s.kvHeads * s.headDim;
  std::mt19937 rng(static_cast<unsigned>(window + 1));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(rows * qWidth)), k(static_cast<size_t>(total * kvWidth)), v(k.size());
  for (std::vector<float>* x : {&q, &k, &v})
    for (float& e : *x) e = dist(rng);
  KvCache cache(nullptr, 1, s.kvHeads, s.headDim, total, DType::F32);
  for (int64_t p = 0; p < total; ++p) cache.store(0, p, k.data() + p * kvWidth, v.data() + p * kvWidth);
  ASSERT_TRUE(prefillAttentionFits(cache, rows));

  std::vector<float> context(q.size(), -9.0f);
  prefillAttention(cache, 0, s, start, rows, q.data(), context.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t position = start + r, kv = h / (s.heads / s.kvHeads);
      const int64_t first = window > 0 ? std::max<int64_t>(0, position - window + 1) : 0;
      std::vector<double> w;
      double top = -1e300, sum = 0;
      for (int64_t j = first; j <= position; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < s.headDim; ++d)
          dot += static_cast<double>(q[static_cast<size_t>(r * qWidth + h * s.headDim + d)]) *
                 k[static_cast<size_t>(j * kvWidth + kv * s.headDim + d)];
        w.push_back(dot * s.scale);
        top = std::max(top, w.back());
      }
      for (double& x : w) sum += (x = std::exp(x - top));
      for (int64_t d = 0; d < s.headDim; ++d) {
        double want = 0;
        for (int64_t j = first; j <= position; ++j)
          want += w[static_cast<size_t>(j - first)] / sum * v[static_cast<size_t>(j * kvWidth + kv * s.headDim + d)];
        ASSERT_NEAR(context[static_cast<size_t>(r * qWidth + h * s.headDim + d)], want, 1e-5)
            << "row " << r << ", head " << h << ", dim " << d;
      }
    }
}

}  // namespace

TEST(PrefillAttention, CausalMatchesDoubleReference) { expectMatchesReference(0); }

TEST(PrefillAttention, SlidingWindowMatchesDoubleReference) { expectMatchesReference(7); }

TEST(PrefillAttention, ShortRunsAndNarrowCachesTakeTheRowPath) {
  const KvCache f16(nullptr, 1, 1, 8, 64, DType::F16), f32(nullptr, 1, 1, 8, 64, DType::F32);
  EXPECT_FALSE(prefillAttentionFits(f16, 64));
  EXPECT_FALSE(prefillAttentionFits(f32, 3));
}
