#include "cpu/kv_attention.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/softmax_rows.h"

namespace gizml::cpu {
namespace {

// Query rows per block: the scores of a block are kBlockRows x keys floats per query head.
constexpr int64_t kBlockRows = 32;

// A row's attention over the keys of one page it sees, before the pages are merged: the largest
// scaled score among them, the sum of their weights e^(score - top), then the weighted sum of their
// value rows (headDim floats). A row that sees no key of the page has the sum 0.
constexpr int64_t kPartHead = 2;
int64_t partWidth(const AttentionShape& s) { return kPartHead + s.headDim; }

// One side of a KV head as a block reads it: each page's stored rows (read once per block, for
// every query head of its group).
struct SideRead {
  std::vector<HeadRows> pages;
  std::vector<KvScratch> scratch;  // a page's unpacked codes and ranges
};

struct Scratch {
  std::vector<float> scores, queries, parts, states;
  SideRead keys, values;
};

// The first key the row at `position` sees (its sliding window's, if any).
int64_t windowStart(const AttentionShape& s, int64_t position) {
  return s.window > 0 ? std::max<int64_t>(0, position - s.window + 1) : 0;
}

// The first key a block starting at `position` reads: a page's first, so that a row's keys break
// into the same pages in any block; a page with none of a row's keys adds nothing to it.
int64_t firstKeyRead(const AttentionShape& s, int64_t position) {
  return windowStart(s, position) / kKvPageTokens * kKvPageTokens;
}

// The parts (rows ldPart apart) of m query rows of A (lda apart; row i at position first + i
// step) over the keys [from, from + count) of one page, k and v their stored rows. Each row's
// weights cover its own keys only (causal, in its window, before keyEnd when that is set).
void pageParts(const AttentionShape& s, const float* a, int64_t m, int64_t lda, int64_t first, int64_t step,
               int64_t from, int64_t count, int64_t keyEnd, const HeadRows& k, const HeadRows& v, float* parts,
               int64_t ldPart, Scratch& w) {
  w.scores.resize(static_cast<size_t>(m * count));
  float* scores = w.scores.data();
  kvScores(a, m, lda, k.rows, s.headDim, count, k.scales, k.offsets, scores, count);
  for (int64_t i = 0; i < m; ++i) {
    float* p = scores + i * count;
    float* part = parts + i * ldPart;
    const int64_t position = first + i * step, end = keyEnd > 0 ? std::min(position + 1, keyEnd) : position + 1;
    const int64_t lo = std::clamp<int64_t>(windowStart(s, position) - from, 0, count);
    const int64_t hi = std::clamp<int64_t>(end - from, lo, count);
    const ExpSum e = lo < hi ? scaledExp(p + lo, hi - lo, s.scale) : ExpSum{0.0f, 0.0f};
    part[0] = e.top, part[1] = e.sum;
    std::fill(p, p + lo, 0.0f);
    std::fill(p + hi, p + count, 0.0f);
  }
  kvContext(scores, m, count, v.rows, count, s.headDim, v.scales, v.offsets, parts + kPartHead, ldPart, false);
}

// A row's state after its pages so far (a part's layout; the sum 0 before the first) with the
// next page's part merged in: both rescaled to the larger top. Every row merges its pages one by
// one in order, whichever block or task computed them, so its bits do not depend on either.
void mergePart(float* state, const float* part, int64_t d) {
  if (part[1] == 0.0f) return;  // none of the row's keys in this page
  if (state[1] == 0.0f) {
    std::copy(part, part + kPartHead + d, state);
    return;
  }
  const float top = std::max(state[0], part[0]);
  float scales[2] = {state[0], part[0]};
  expShifted(scales, 2, top);
  const float a = scales[0], b = scales[1];
  state[0] = top;
  for (int64_t x = 1; x < kPartHead + d; ++x) state[x] = state[x] * a + part[x] * b;
}

// A row's context from its merged state: the weighted sum over the sum of the weights, turned
// back where the values are rotated.
void finishRow(const float* state, int64_t d, bool rotated, float* c) {
  const float inv = 1.0f / state[1];
  for (int64_t x = 0; x < d; ++x) c[x] = state[kPartHead + x] * inv;
  if (rotated) rotateHead(c, d);
}

// `heads` query heads of d from q, each rotated, into `to` (the keys are rotated: q.k is kept).
void rotatedCopy(const float* q, int64_t heads, int64_t d, float* to) {
  std::copy(q, q + heads * d, to);
  for (int64_t h = 0; h < heads; ++h) rotateHead(to + h * d, d);
}

// The queries of n rows of head kvHead's group from row r0 (row r's group of heads at q + r
// qWidth): in place, or a rotated copy ([n, group, d]) where the keys are rotated (q.k is kept).
struct Queries {
  const float* rows;
  int64_t ld;  // between rows
};
Queries groupQueries(const AttentionRun& run, const AttentionShape& s, int64_t kvHead, int64_t r0, int64_t n,
                     Scratch& w) {
  const int64_t qWidth = s.heads * s.headDim, group = s.heads / s.kvHeads, d = s.headDim;
  const float* q = run.q + r0 * qWidth + kvHead * group * d;
  if (!rotatesHeads(run.cache.keys, d)) return {q, qWidth};
  w.queries.resize(static_cast<size_t>(n * group * d));
  for (int64_t r = 0; r < n; ++r) rotatedCopy(q + r * qWidth, group, d, w.queries.data() + r * group * d);
  return {w.queries.data(), group * d};
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

// Rows [r0, r0 + n) of a run, the query heads of one KV head, page after page.
void attendBlock(const AttentionRun& run, const AttentionShape& s, int64_t kvHead, int64_t r0, int64_t n,
                 Scratch& w) {
  const int64_t qWidth = s.heads * s.headDim, group = s.heads / s.kvHeads, d = s.headDim, position = run.start + r0;
  const int64_t k0 = firstKeyRead(s, position), keys = position + n - k0, ld = partWidth(s);
  readSide(run.cache, true, kvHead, k0, keys, w.keys);
  readSide(run.cache, false, kvHead, k0, keys, w.values);
  const Queries q = groupQueries(run, s, kvHead, r0, n, w);
  const bool rotated = rotatesHeads(run.cache.values, d);
  w.parts.resize(static_cast<size_t>(n * ld));
  w.states.resize(static_cast<size_t>(n * ld));
  // A product per head over the block's rows.
  for (int64_t h = 0; h < group; ++h) {
    for (int64_t r = 0; r < n; ++r) w.states[static_cast<size_t>(r * ld + 1)] = 0.0f;
    size_t page = 0;
    forEachPagePart(k0, keys, [&](int64_t from, int64_t count) {
      if (from + count < k0 + keys) prefetchPageStart(run.cache, kvHead, from + count);
      pageParts(s, q.rows + h * d, n, q.ld, position, 1, from, count, run.keyEnd, w.keys.pages[page], w.values.pages[page],
                w.parts.data(), ld, w);
      ++page;
      for (int64_t r = 0; r < n; ++r) mergePart(w.states.data() + r * ld, w.parts.data() + r * ld, d);
    });
    float* c = run.context + r0 * qWidth + (kvHead * group + h) * d;
    for (int64_t r = 0; r < n; ++r) finishRow(w.states.data() + r * ld, d, rotated, c + r * qWidth);
  }
}

// A decode step (one row) split by pages over the threads: each page's parts of a KV head's group
// of query heads into `parts` ([pages, group, partWidth]); the task that finishes a head's last
// page merges them in order. The same merges as a block's, so the same bits.
struct DecodeRow {
  int64_t k0, pages;
  const float* q;                  // the row's queries, rotated once where the keys are
  float* parts;                    // kvHeads x pages x group x partWidth
  std::atomic<int64_t>* pending;   // a KV head's pages not yet done
};

void attendPage(const AttentionRun& run, const AttentionShape& s, const DecodeRow& row, int64_t kvHead, int64_t page,
                Scratch& w) {
  const int64_t group = s.heads / s.kvHeads, d = s.headDim, ld = partWidth(s), position = run.start;
  const int64_t from = row.k0 + page * kKvPageTokens, count = std::min(kKvPageTokens, position + 1 - from);
  if (w.keys.scratch.empty()) w.keys.scratch.resize(1), w.values.scratch.resize(1);  // (a block's may be more)
  if (page + 1 == row.pages && run.newKeys)  // the step's own key and value, then their page
    storeHeadRows(run.cache, position, 1, kvHead, run.newKeys, run.newValues, run.newStride);
  const HeadRows k = keyBlock(run.cache, kvHead, from, count, w.keys.scratch[0]);
  const HeadRows v = valueBlock(run.cache, kvHead, from, count, w.values.scratch[0]);
  if (page + 1 < row.pages) prefetchPageStart(run.cache, kvHead, from + kKvPageTokens);  // this thread's next task
  // The group's query heads (d apart) are the rows of one product.
  const float* q = row.q + kvHead * group * d;
  float* headParts = row.parts + kvHead * row.pages * group * ld;
  pageParts(s, q, group, d, position, 0, from, count, run.keyEnd, k, v, headParts + page * group * ld, ld, w);
  if (row.pending[kvHead].fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  w.states.resize(static_cast<size_t>(group * ld));
  float* c = run.context + kvHead * group * d;
  const bool rotated = rotatesHeads(run.cache.values, d);
  for (int64_t h = 0; h < group; ++h) {
    float* state = w.states.data() + h * ld;
    state[1] = 0.0f;
    for (int64_t p = 0; p < row.pages; ++p) mergePart(state, headParts + (p * group + h) * ld, d);
    finishRow(state, d, rotated, c + h * d);
  }
}

// The new keys and values of the runs of several rows, before any is read (a decode step's one
// row is stored by the task that reads it): a prefill's by storeKeysValues, and those of a few
// rows (a token and its drafts, for each of a batch's sequences) in one job over runs and heads.
void storeAhead(const std::vector<AttentionRun>& runs) {
  std::vector<std::pair<const AttentionRun*, int64_t>> fewRows;  // (run, KV head)
  for (const AttentionRun& run : runs) {
    if (!run.newKeys || run.rows == 1) continue;
    if (run.rows > kKvFewRows) {
      storeKeysValues(run.cache, run.start, run.rows, run.newKeys, run.newValues, run.newStride);
      continue;
    }
    for (int64_t h = 0; h < run.cache.kvHeads; ++h) fewRows.emplace_back(&run, h);
  }
  core::parallelTasks(static_cast<int64_t>(fewRows.size()), [&](int64_t t) {
    const auto [run, h] = fewRows[static_cast<size_t>(t)];
    storeHeadRows(run->cache, run->start, run->rows, h, run->newKeys, run->newValues, run->newStride);
  });
}

}  // namespace

void cachedAttention(const std::vector<AttentionRun>& runs, const AttentionShape& s) {
  // Tasks: a decode step's (KV head, page), another run's (block, KV head), the runs' in order.
  // Causal blocks late in a run see more keys, so the tasks go to whichever thread is free, the
  // last (largest) first: halves of the range gave one thread three times the other's work in a
  // prefill. A decode step split by pages keeps both threads on a model with one to three KV
  // heads.
  storeAhead(runs);
  const int64_t group = s.heads / s.kvHeads, ld = partWidth(s);
  std::vector<int64_t> firstTask{0};
  std::vector<DecodeRow> decode(runs.size(), DecodeRow{0, 0, nullptr, nullptr, nullptr});
  int64_t partFloats = 0, pendingCount = 0, rotatedFloats = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    const AttentionRun& run = runs[r];
    if (run.rows == 1) {
      DecodeRow& row = decode[r];
      row.k0 = firstKeyRead(s, run.start);
      row.pages = (run.start + 1 - row.k0 + kKvPageTokens - 1) / kKvPageTokens;
      partFloats += s.kvHeads * row.pages * group * ld;
      pendingCount += s.kvHeads;
      if (rotatesHeads(run.cache.keys, s.headDim)) rotatedFloats += s.heads * s.headDim;
      firstTask.push_back(firstTask.back() + s.kvHeads * row.pages);
    } else {
      firstTask.push_back(firstTask.back() + (run.rows + kBlockRows - 1) / kBlockRows * s.kvHeads);
    }
  }
  // The caller's, kept from call to call (a decode step's layers need the same sizes).
  thread_local std::vector<float> parts, rotated;
  thread_local std::vector<std::atomic<int64_t>> pending;
  parts.resize(static_cast<size_t>(partFloats));
  rotated.resize(static_cast<size_t>(rotatedFloats));
  if (pending.size() < static_cast<size_t>(pendingCount)) pending = std::vector<std::atomic<int64_t>>(static_cast<size_t>(pendingCount));
  for (size_t r = 0, p = 0, q = 0, rq = 0; r < runs.size(); ++r) {
    DecodeRow& row = decode[r];
    if (row.pages == 0) continue;
    row.q = runs[r].q;
    if (rotatesHeads(runs[r].cache.keys, s.headDim)) {
      // Once for all of the row's pages.
      rotatedCopy(row.q, s.heads, s.headDim, rotated.data() + rq);
      row.q = rotated.data() + rq, rq += static_cast<size_t>(s.heads * s.headDim);
    }
    row.parts = parts.data() + p, row.pending = pending.data() + q;
    for (int64_t h = 0; h < s.kvHeads; ++h) row.pending[h].store(row.pages, std::memory_order_relaxed);
    p += static_cast<size_t>(s.kvHeads * row.pages * group * ld), q += static_cast<size_t>(s.kvHeads);
  }
  core::parallelTasks(firstTask.back(), [&](int64_t task) {
    thread_local Scratch scratch;  // kept: a prefill's layers reuse the same sizes
    const int64_t t = firstTask.back() - 1 - task;
    const size_t r = static_cast<size_t>(std::upper_bound(firstTask.begin(), firstTask.end(), t) - firstTask.begin() - 1);
    const AttentionRun& run = runs[r];
    const int64_t local = t - firstTask[r];
    if (decode[r].pages > 0) {
      const int64_t pages = decode[r].pages;  // a thread's next task: the same head's next page
      attendPage(run, s, decode[r], local / pages, pages - 1 - local % pages, scratch);
      return;
    }
    const int64_t kvHead = local % s.kvHeads, r0 = local / s.kvHeads * kBlockRows;
    attendBlock(run, s, kvHead, r0, std::min(kBlockRows, run.rows - r0), scratch);
  });
}

}  // namespace gizml::cpu
