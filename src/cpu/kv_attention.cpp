#include "cpu/kv_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "core/thread_pool.h"
#include "cpu/softmax_rows.h"

namespace gizml::cpu {
namespace {

// Query rows per block: the scores of a block are kBlockRows x keys floats per query head.
constexpr int64_t kBlockRows = 32;

// One side of a KV head as a block reads it: each page's stored rows (read once per block, for
// every query head of its group).
struct SideRead {
  std::vector<HeadRows> pages;
  std::vector<KvScratch> scratch;  // a page's unpacked codes and ranges
};

struct Scratch {
  std::vector<float> scores, queries;
  SideRead keys, values;
};

// The first key the row at `position` sees (its sliding window's, if any).
int64_t windowStart(const AttentionShape& s, int64_t position) {
  return s.window > 0 ? std::max<int64_t>(0, position - s.window + 1) : 0;
}

// The first key a block starting at `position` reads: a page's first, so that a row's sums over
// keys break into the same pages in any block; the keys before its own first add exact zeros.
int64_t firstKeyRead(const AttentionShape& s, int64_t position) {
  return windowStart(s, position) / kKvPageTokens * kKvPageTokens;
}

// Each row's probabilities over its own keys (causal, in its window, before keyEnd when that is
// set) from its scores, in place; zeros elsewhere. scaledSoftmax's bits do not depend on the
// block a row is in (one chain through libm's expf was a quarter of a 2k-token context's decode
// step; a scalar loop for the maximum and sums, a sixth).
void softmaxRows(const AttentionShape& s, float* scores, int64_t m, int64_t keys, int64_t first, int64_t step,
                 int64_t k0, int64_t keyEnd) {
  for (int64_t i = 0; i < m; ++i) {
    float* p = scores + i * keys;
    const int64_t position = first + i * step, lo = windowStart(s, position) - k0;
    const int64_t hi = (keyEnd > 0 ? std::min(position + 1, keyEnd) : position + 1) - k0;
    scaledSoftmax(p + lo, hi - lo, s.scale);
    std::fill(p, p + lo, 0.0f);
    std::fill(p + hi, p + keys, 0.0f);
  }
}

// Asks for the first bytes of a page's rows before they are read (the page after the one being
// read: pages lie apart, so the prefetch ahead within a page's rows starts late on each).
void prefetchStart(const HeadRows& rows) {
  constexpr int kBytes = 4096;
  for (int b = 0; b < kBytes; b += 64) __builtin_prefetch(static_cast<const char*>(rows.rows.data) + b);
}

// Attention of m query rows of A (lda apart; row i at position first + i * step) over the keys
// and values from k0 on (keys of them) into C's rows. A page's scores are its own columns of one
// product's; its part of the context is added after those before it.
void attendRows(const AttentionShape& s, const float* a, int64_t m, int64_t lda, int64_t first, int64_t step,
                int64_t k0, int64_t keys, int64_t keyEnd, float* c, int64_t ldc, Scratch& w) {
  w.scores.resize(static_cast<size_t>(m * keys));
  float* scores = w.scores.data();
  size_t page = 0;
  forEachPagePart(k0, keys, [&](int64_t from, int64_t count) {
    if (page + 1 < w.keys.pages.size()) prefetchStart(w.keys.pages[page + 1]);
    const HeadRows& k = w.keys.pages[page++];
    kvScores(a, m, lda, k.rows, s.headDim, count, k.scales, k.offsets, scores + (from - k0), keys);
  });
  softmaxRows(s, scores, m, keys, first, step, k0, keyEnd);
  page = 0;
  forEachPagePart(k0, keys, [&](int64_t from, int64_t count) {
    if (page + 1 < w.values.pages.size()) prefetchStart(w.values.pages[page + 1]);
    const HeadRows& v = w.values.pages[page];
    kvContext(scores + (from - k0), m, keys, v.rows, count, s.headDim, v.scales, v.offsets, c, ldc, page++ > 0);
  });
}

// Head kvHead's keys (or values) from k0 on as the block reads them.
void readSide(const KvLayer& cache, bool keys, int64_t kvHead, int64_t k0, int64_t count, SideRead& side) {
  side.pages.clear();
  // The scratch is sized first: the rows of earlier pages point into it.
  side.scratch.resize(static_cast<size_t>((k0 + count - 1) / kKvPageTokens - k0 / kKvPageTokens + 1));
  forEachPagePart(k0, count, [&](int64_t from, int64_t n) {
    KvScratch& scratch = side.scratch[side.pages.size()];
    side.pages.push_back(keys ? keyBlock(cache, kvHead, from, n, scratch) : valueBlock(cache, kvHead, from, n, scratch));
  });
}

// Rows [r0, r0 + n) of a run, the query heads of one KV head.
void attendBlock(const AttentionRun& run, const AttentionShape& s, int64_t kvHead, int64_t r0, int64_t n,
                 Scratch& w) {
  const int64_t qWidth = s.heads * s.headDim, group = s.heads / s.kvHeads, d = s.headDim, position = run.start + r0;
  const int64_t k0 = firstKeyRead(s, position), keys = position + n - k0;
  readSide(run.cache, true, kvHead, k0, keys, w.keys);
  readSide(run.cache, false, kvHead, k0, keys, w.values);
  const float* q = run.q + r0 * qWidth + kvHead * group * d;
  int64_t ldq = qWidth;
  float* c = run.context + r0 * qWidth + kvHead * group * d;
  if (rotatesHeads(run.cache.keys, d)) {
    // The keys are rotated: so are the queries (a copy of the block's), and q.k stays.
    w.queries.resize(static_cast<size_t>(n * group * d));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t h = 0; h < group; ++h) {
        float* to = w.queries.data() + (r * group + h) * d;
        std::copy(q + r * qWidth + h * d, q + r * qWidth + (h + 1) * d, to);
        rotateHead(to, d);
      }
    q = w.queries.data(), ldq = group * d;
  }
  // One row (a decode step): its group of heads are the rows of one product, sharing the keys'
  // packing. More: a product per head over the block's rows (the same sums either way).
  if (n == 1) {
    attendRows(s, q, group, d, position, 0, k0, keys, run.keyEnd, c, d, w);
  } else {
    for (int64_t h = 0; h < group; ++h)
      attendRows(s, q + h * d, n, ldq, position, 1, k0, keys, run.keyEnd, c + h * d, qWidth, w);
  }
  // Rotated values give the rotated context: turned back.
  if (rotatesHeads(run.cache.values, d))
    for (int64_t r = 0; r < n; ++r)
      for (int64_t h = 0; h < group; ++h) rotateHead(c + r * qWidth + h * d, d);
}

}  // namespace

void cachedAttention(const std::vector<AttentionRun>& runs, const AttentionShape& s) {
  // Tasks: (run, block, KV head), the runs' in order. Causal blocks late in a run see more keys,
  // so the tasks go to whichever thread is free, the last (largest) first: halves of the range
  // gave one thread three times the other's work in a prefill.
  std::vector<int64_t> firstTask{0};
  for (const AttentionRun& run : runs)
    firstTask.push_back(firstTask.back() + (run.rows + kBlockRows - 1) / kBlockRows * s.kvHeads);
  core::parallelTasks(firstTask.back(), [&](int64_t task) {
    thread_local Scratch scratch;  // kept: a prefill's layers reuse the same sizes
    const int64_t t = firstTask.back() - 1 - task;
    const size_t r = static_cast<size_t>(std::upper_bound(firstTask.begin(), firstTask.end(), t) - firstTask.begin() - 1);
    const AttentionRun& run = runs[r];
    const int64_t local = t - firstTask[r], kvHead = local % s.kvHeads, r0 = local / s.kvHeads * kBlockRows;
    attendBlock(run, s, kvHead, r0, std::min(kBlockRows, run.rows - r0), scratch);
  });
}

}  // namespace gizml::cpu
