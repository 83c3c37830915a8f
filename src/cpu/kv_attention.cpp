#include "cpu/kv_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/thread_pool.h"
#include "cpu/gemm.h"

namespace gizml::cpu {
namespace {

static_assert(kKvPageTokens % kGemmKc == 0, "a page's keys must be whole k blocks of sgemm");

// Query rows per block: the scores of a block are kBlockRows x keys floats per query head.
constexpr int64_t kBlockRows = 32;

// At most this many bytes of a pass's keys and values are widened to f32 ahead of its blocks.
constexpr int64_t kAheadBytes = int64_t{64} << 20;

struct Scratch {
  std::vector<float> scores, keys, values, queries;
  std::vector<KeySpan> spans;
};

// One KV head's keys and values of a run as f32 spans from position `first` on, widened once for
// all of the run's blocks (a prefill's blocks would otherwise widen the same keys again, block by
// block).
struct WidenedHead {
  std::vector<KeySpan> spans;
  int64_t first = -1;  // -1: not widened ahead
  std::vector<float> keyBuffer, valueBuffer;
};

bool readInPlace(const KvLayer& cache) {
  return cache.keys.bits == 0 && cache.keys.dtype == DType::F32 && cache.values.bits == 0 &&
         cache.values.dtype == DType::F32;
}

// The parts of spans within positions k0 .. k0 + count - 1.
void clipSpans(const std::vector<KeySpan>& spans, int64_t k0, int64_t count, std::vector<KeySpan>& out) {
  out.clear();
  for (const KeySpan& span : spans) {
    const int64_t lo = std::max(k0, span.first), hi = std::min(k0 + count, span.first + span.count);
    if (lo >= hi) continue;
    const int64_t skip = lo - span.first;
    out.push_back({lo, hi - lo, {span.keys.data + skip, span.keys.stride},
                   {span.values.data + skip * span.values.stride, span.values.stride}});
  }
}

// The first key the row at `position` sees (its sliding window's, if any).
int64_t windowStart(const AttentionShape& s, int64_t position) {
  return s.window > 0 ? std::max<int64_t>(0, position - s.window + 1) : 0;
}

// The first key a block starting at `position` reads: a multiple of kGemmKc, so that a row's sums
// over keys break into the same k blocks (those of absolute positions) in any block; the keys
// before its own first add exact zeros.
int64_t firstKeyRead(const AttentionShape& s, int64_t position) {
  return windowStart(s, position) / kGemmKc * kGemmKc;
}

// Attention of m query rows of A (lda apart; row i at position first + i * step) over the keys
// and values from k0 on (keys of them, in spans), into C's rows. A span's scores are its own
// columns of one product's; its part of the context is added after the spans before it, which
// gives the bits of one product over all the keys: the spans start at multiples of kGemmKc.
void attendRows(const AttentionShape& s, const float* a, int64_t m, int64_t lda, int64_t first, int64_t step,
                int64_t k0, int64_t keys, const std::vector<KeySpan>& spans, float* c, int64_t ldc,
                std::vector<float>& scores) {
  scores.resize(static_cast<size_t>(m * keys));
  for (const KeySpan& span : spans)
    sgemm(m, span.count, s.headDim, a, lda, 1, span.keys.data, span.keys.stride, 1, scores.data() + (span.first - k0),
          keys, false);
  for (int64_t i = 0; i < m; ++i) {
    float* p = scores.data() + i * keys;
    const int64_t position = first + i * step, lo = windowStart(s, position) - k0, hi = position - k0 + 1;
    float top = -std::numeric_limits<float>::infinity();
    for (int64_t j = lo; j < hi; ++j) top = std::max(top, p[j] * s.scale);
    float sum = 0.0f;
    for (int64_t j = lo; j < hi; ++j) sum += (p[j] = std::exp(p[j] * s.scale - top));
    const float inv = 1.0f / sum;
    std::fill(p, p + lo, 0.0f);
    for (int64_t j = lo; j < hi; ++j) p[j] *= inv;
    std::fill(p + hi, p + keys, 0.0f);
  }
  for (size_t i = 0; i < spans.size(); ++i)
    sgemm(m, s.headDim, spans[i].count, scores.data() + (spans[i].first - k0), keys, 1, spans[i].values.data,
          spans[i].values.stride, 1, c, ldc, i > 0);
}

// Rows [r0, r0 + n) of a run, the query heads of one KV head.
void attendBlock(const AttentionRun& run, const AttentionShape& s, int64_t kvHead, int64_t r0, int64_t n,
                 const WidenedHead& ahead, Scratch& w) {
  const int64_t qWidth = s.heads * s.headDim, group = s.heads / s.kvHeads, d = s.headDim, position = run.start + r0;
  const int64_t k0 = firstKeyRead(s, position), keys = position + n - k0;
  if (ahead.first >= 0) clipSpans(ahead.spans, k0, keys, w.spans);
  else w.spans = headSpans(run.cache, kvHead, k0, keys, w.keys, w.values);
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
    attendRows(s, q, group, d, position, 0, k0, keys, w.spans, c, d, w.scores);
  } else {
    for (int64_t h = 0; h < group; ++h)
      attendRows(s, q + h * d, n, ldq, position, 1, k0, keys, w.spans, c + h * d, qWidth, w.scores);
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
  // Runs of several blocks over keys and values that are not f32 already: each head widened once
  // ahead (in parallel over heads), within kAheadBytes for the pass.
  std::vector<WidenedHead> ahead(runs.size() * static_cast<size_t>(s.kvHeads));
  std::vector<int64_t> widen;
  int64_t bytes = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    const AttentionRun& run = runs[r];
    const int64_t span = run.start + run.rows - firstKeyRead(s, run.start);
    if (run.rows <= kBlockRows || readInPlace(run.cache)) continue;
    if ((bytes += 2 * span * s.headDim * s.kvHeads * static_cast<int64_t>(sizeof(float))) > kAheadBytes) break;
    for (int64_t h = 0; h < s.kvHeads; ++h) widen.push_back(static_cast<int64_t>(r) * s.kvHeads + h);
  }
  core::parallelTasks(static_cast<int64_t>(widen.size()), [&](int64_t i) {
    const int64_t at = widen[static_cast<size_t>(i)], kvHead = at % s.kvHeads;
    const AttentionRun& run = runs[static_cast<size_t>(at / s.kvHeads)];
    WidenedHead& head = ahead[static_cast<size_t>(at)];
    const int64_t first = firstKeyRead(s, run.start), keys = run.start + run.rows - first;
    head.spans = headSpans(run.cache, kvHead, first, keys, head.keyBuffer, head.valueBuffer);
    head.first = first;
  });
  core::parallelTasks(firstTask.back(), [&](int64_t task) {
    thread_local Scratch scratch;  // kept: a prefill's layers reuse the same sizes
    const int64_t t = firstTask.back() - 1 - task;
    const size_t r = static_cast<size_t>(std::upper_bound(firstTask.begin(), firstTask.end(), t) - firstTask.begin() - 1);
    const AttentionRun& run = runs[r];
    const int64_t local = t - firstTask[r], kvHead = local % s.kvHeads, r0 = local / s.kvHeads * kBlockRows;
    const WidenedHead& widened = ahead[r * static_cast<size_t>(s.kvHeads) + static_cast<size_t>(kvHead)];
    attendBlock(run, s, kvHead, r0, std::min(kBlockRows, run.rows - r0), widened, scratch);
  });
}

}  // namespace gizml::cpu
