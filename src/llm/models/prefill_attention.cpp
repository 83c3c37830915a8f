#include "llm/models/prefill_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/gemm.h"

namespace gizml::llm {
namespace {

// Query rows per block: the scores of a block are blockRows x keys floats per head.
constexpr int64_t kBlockRows = 32;

}  // namespace

bool prefillAttentionFits(const KvCache& cache, int64_t rows) { return cache.dtype() == DType::F32 && rows >= 16; }

void prefillAttention(const KvCache& cache, int64_t layer, const AttentionShape& s, int64_t start, int64_t rows,
                      const float* q, float* context) {
  const int64_t qWidth = s.heads * s.headDim, kvWidth = s.kvHeads * s.headDim, group = s.heads / s.kvHeads;
  const int64_t blocks = (rows + kBlockRows - 1) / kBlockRows;
  // The first key row r may see (causal, within the window).
  const auto firstKey = [&](int64_t position) { return s.window > 0 ? std::max<int64_t>(0, position - s.window + 1) : 0; };
  core::parallelFor(s.kvHeads * blocks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> scores;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t kvHead = t % s.kvHeads, block = t / s.kvHeads;
      const int64_t r0 = block * kBlockRows, n = std::min(kBlockRows, rows - r0);
      const int64_t k0 = firstKey(start + r0), keys = start + r0 + n - k0;  // the block's key range
      const float* key = static_cast<const float*>(cache.key(layer, k0, kvHead));
      const float* value = static_cast<const float*>(cache.value(layer, k0, kvHead));
      scores.resize(static_cast<size_t>(n * keys));
      for (int64_t h = kvHead * group; h < (kvHead + 1) * group; ++h) {
        const float* qh = q + r0 * qWidth + h * s.headDim;
        // scores [n, keys] = Q_h K^T: the keys are rows of the cache, kvWidth apart.
        cpu::sgemm(n, keys, s.headDim, qh, qWidth, 1, key, 1, kvWidth, scores.data(), keys, false);
        for (int64_t i = 0; i < n; ++i) {
          float* p = scores.data() + i * keys;
          const int64_t position = start + r0 + i, lo = firstKey(position) - k0, hi = position - k0 + 1;
          float top = -std::numeric_limits<float>::infinity();
          for (int64_t j = lo; j < hi; ++j) top = std::max(top, p[j] * s.scale);
          float sum = 0.0f;
          for (int64_t j = lo; j < hi; ++j) sum += (p[j] = std::exp(p[j] * s.scale - top));
          const float inv = 1.0f / sum;
          std::fill(p, p + lo, 0.0f);
          for (int64_t j = lo; j < hi; ++j) p[j] *= inv;
          std::fill(p + hi, p + keys, 0.0f);
        }
        // context_h [n, headDim] = P V.
        cpu::sgemm(n, s.headDim, keys, scores.data(), keys, 1, value, kvWidth, 1, context + r0 * qWidth + h * s.headDim,
                   qWidth, false);
      }
    }
  });
}

}  // namespace gizml::llm
