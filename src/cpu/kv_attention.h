#pragma once
// A sequence's keys and values on the CPU, and causal attention over them.
//
// Layout of one layer, a page of positions at a time (llm/ops/kv_pool.h owns the memory): values
// are rows, [kvHeads, positions, headDim]; keys are columns, [kvHeads, headDim, positions]: the
// scores q K^T then read K^T as a row-major matrix, streamed in place for a decode step (keys as
// rows had to be transposed into sgemm's panels on every step, a quarter of a long context's
// decode time), page by page. A head's keys and its values are each one run of memory in a page,
// which a head's attention reads front to back (values as [positions, kvHeads, headDim] left a
// head's rows apart: SmolLM2's 128 bytes out of every 384). Each in
// F32, F16 or BF16 elements, or in codes of 8, 4 or 2 bits (cpu/kv_codes.h: a scale and an
// offset per head and token), packed along the rows (a key column's positions, a value row's
// dimensions), low bits first. Attention reads them as stored, elements and codes alike, by the
// products over stored values (cpu/kv_products.h: widened in registers; for codes the scale and
// offset applied to sums over the codes themselves). F32 went through sgemm until the products
// read them faster (docs/benchmarks.md), with the same bits: sgemm's chains per k block of
// kGemmKc are a page's.
//
// Attention runs over runs of consecutive query rows (each run one sequence's rows of a pass: a
// prefill, a decode step, drafts) page by page, as flash attention does by blocks of keys: a row's
// part of a page is the largest of its scaled scores there (one product over stored values per
// page, cpu/kv_products.h), the sum of its weights e^(score - that) over its own keys (causal,
// and the sliding window if any) and their weighted sum of value rows (another product); the
// parts of a row's pages are merged in page order, each rescaled to the larger maximum. Blocks of
// 32 rows merge as they go; a decode step's row splits its pages over the threads and the last to
// finish merges them, so that a model with one KV head still uses both threads. Every row, alone
// or in a block, makes the same parts and the same merges, so its context is the same bits
// whatever the rows beside it and the threads (docs/architecture.md, "Batch invariance"): the
// products' sums per element do not depend on their shape, masked keys add exact zeros, and a
// block's keys start at a page's first position, so that a row's keys break into the same pages
// in any block of rows.
#include <gizml/dtype.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu/kv_products.h"

namespace gizml::cpu {

/// The keys or the values of one layer: elements of `dtype` (bits 0), or codes of `bits` bits
/// with ranges, a scale and an offset (F16 bits) per head and token.
struct KvSide {
  uint8_t* data;
  uint16_t* ranges = nullptr;
  DType dtype = DType::F32;
  int bits = 0;
};

/// Coded keys and values are coded after an orthonormal Hadamard rotation of each head's vector
/// (when headDim is a power of two), which spreads a channel's outlier over the whole vector, so
/// that one range fits every value: attention rotates the queries alike (q.k is kept) and turns
/// the context back (the values' rotation undone: the rotation is its own inverse).
bool rotatesHeads(const KvSide& side, int64_t headDim);
/// x (n values, n a power of two) times the Walsh-Hadamard matrix over sqrt(n), in place.
void rotateHead(float* x, int64_t n);

/// The longest head whose keys and values may be coded.
inline constexpr int64_t kMaxCodedHead = 512;

/// Keys and values live in pages of kKvPageTokens positions (llm/ops/kv_pool.h owns them): the
/// products over keys sum a page's part in one chain, its context added after the pages before.
inline constexpr int64_t kKvPageTokens = 256;
/// A store of up to this many tokens (a decode step's, a token's drafts) goes head by head over
/// the threads, each head's lines asked for first: its key columns' lines are each written once
/// or twice, a prefill's many times.
inline constexpr int64_t kKvFewRows = 8;

/// One layer of one sequence's cache, laid out as above page by page: a page of keys is
/// [kvHeads, headDim, kKvPageTokens] (ranges [kvHeads, kKvPageTokens, 2]), a page of values
/// [kvHeads, kKvPageTokens, headDim] (ranges the same as the keys'); the sides hold the
/// pool's pages one after another, and the sequence's page table says which are its own.
struct KvLayer {
  KvSide keys, values;
  int64_t kvHeads, headDim;
  const int32_t* pages;  // position p lies in page pages[p / kKvPageTokens]
};

/// Bytes of one key column (count positions) or one value row (count = headDim values) of a side.
int64_t kvRowBytes(const KvSide& side, int64_t count);

/// Writes the keys and values of `rows` tokens from position `start` on: row r of keys and of
/// values (kvHeads * headDim floats each, `stride` floats apart) is the token at start + r. The
/// page table covers those positions.
void storeKeysValues(const KvLayer& layer, int64_t start, int64_t rows, const float* keys, const float* values,
                     int64_t stride);
/// The same for KV head `head` alone, on the calling thread.
void storeHeadRows(const KvLayer& layer, int64_t start, int64_t rows, int64_t head, const float* keys,
                   const float* values, int64_t stride);

/// Calls f(first, count) for each page's part of positions k0 .. k0 + count - 1, in order.
template <class F>
void forEachPagePart(int64_t k0, int64_t count, F f) {
  for (int64_t p = k0; p < k0 + count;) {
    const int64_t n = std::min(kKvPageTokens - p % kKvPageTokens, k0 + count - p);
    f(p, n);
    p += n;
  }
}

/// One head's keys or values within one page as the products over stored values read them
/// (cpu/kv_products.h): elements, or codes a byte each with each position's scale and
/// offset as floats (zeros after the last, to a whole kKvLanes; null for elements).
struct HeadRows {
  KvRows rows;
  const float* scales;
  const float* offsets;
};
/// Where a HeadRows' unpacked codes and widened ranges live (a thread's, reused).
struct KvScratch {
  std::vector<uint8_t> codes;
  std::vector<float> scales, offsets, halves;
};
/// Head kvHead's keys for positions first .. first + count - 1 of one page, [headDim, count]: the
/// page's own rows for elements and 8-bit codes, else codes unpacked into the scratch.
HeadRows keyBlock(const KvLayer& layer, int64_t kvHead, int64_t first, int64_t count, KvScratch& scratch);
/// Its values for those positions, [count, headDim], likewise.
HeadRows valueBlock(const KvLayer& layer, int64_t kvHead, int64_t first, int64_t count, KvScratch& scratch);

/// Asks for the first bytes of head kvHead's keys and of its values (and their ranges, for codes)
/// in the page holding `position`, to be read soon (pages lie apart: the prefetch within a page's
/// rows starts late on each); no architectural effect.
void prefetchPageStart(const KvLayer& layer, int64_t kvHead, int64_t position);

struct AttentionShape {
  int64_t heads, kvHeads, headDim;
  float scale;         // of the scores: 1/sqrt(headDim), or Gemma's query_pre_attn_scalar
  int64_t window = 0;  // sliding window (the key at distance window - 1 is the oldest); 0: none
};

/// `rows` query rows of one sequence at positions start .. start + rows - 1; q's rows are
/// heads * headDim wide, and so are context's. The cache holds every position up to the last.
/// keyEnd > 0: no row sees a key at or past that position (padding after a prompt, as a
/// transformers attention_mask of ones then zeros); each row sees at least key 0.
struct AttentionRun {
  KvLayer cache;
  int64_t start, rows;
  const float* q;
  float* context;
  int64_t keyEnd = 0;
  // When set, the run's own keys and values (as storeKeysValues takes them), stored before they
  // are read: a decode step's by the task that attends its KV head's last page, which spares the
  // step a job a layer (a small model's decode makes about 180).
  const float* newKeys = nullptr;
  const float* newValues = nullptr;
  int64_t newStride = 0;
};

/// The context rows of every run, in parallel over the runs' KV heads and blocks of rows (a
/// decode step's: its pages), each run's new keys and values stored first.
void cachedAttention(const std::vector<AttentionRun>& runs, const AttentionShape& s);

}  // namespace gizml::cpu
