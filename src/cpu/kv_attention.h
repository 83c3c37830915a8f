#pragma once
// A sequence's keys and values on the CPU, and causal attention over them.
//
// Layout of one layer (llm/ops/kv_cache.h owns the memory): values are rows, [capacity, kvHeads,
// headDim]; keys are columns, [kvHeads, headDim, capacity]: the scores q K^T then read K^T as a
// row-major matrix, which sgemm streams in place for a decode step (keys as rows had to be
// transposed into its panels on every step, a quarter of a long context's decode time). Both in
// F32, F16 or BF16; attention reads them as stored (16-bit widened exactly to f32).
//
// Attention runs over runs of consecutive query rows (each run one sequence's rows of a pass: a
// prefill, a decode step, drafts), by blocks of query rows: a block's scores against every key it
// may see are one sgemm, the softmax runs over each row's own keys (causal, and the sliding
// window if any), and the context is another sgemm. Every row, alone or in a block of 32, goes
// through this one path, so its context is the same bits whatever the rows beside it
// (docs/architecture.md, "Batch invariance"): sgemm's sums per element do not depend on the
// product's shape (cpu/gemm.h), masked keys add exact zeros, and a block's keys start at a
// multiple of sgemm's k block (kGemmKc), so that a row's sums over keys break into the same k
// blocks in any block of rows.
#include <gizml/dtype.h>

#include <cstdint>
#include <vector>

namespace gizml::cpu {

/// One layer of one sequence's cache, laid out as above.
struct KvLayer {
  uint8_t* keys;    // [kvHeads, headDim, capacity]
  uint8_t* values;  // [capacity, kvHeads, headDim]
  int64_t kvHeads, headDim, capacity;
  DType dtype;      // F32, F16 or BF16
};

/// Writes the keys and values of `rows` tokens from position `start` on: row r of keys and of
/// values (kvHeads * headDim floats each, `stride` floats apart) is the token at start + r.
void storeKeysValues(const KvLayer& layer, int64_t start, int64_t rows, const float* keys, const float* values,
                     int64_t stride);
/// The first `length` positions of `from` into `to` (layers of the same shape and dtype).
void copyKeysValues(const KvLayer& from, const KvLayer& to, int64_t length);

struct AttentionShape {
  int64_t heads, kvHeads, headDim;
  float scale;         // of the scores: 1/sqrt(headDim), or Gemma's query_pre_attn_scalar
  int64_t window = 0;  // sliding window (the key at distance window - 1 is the oldest); 0: none
};

/// `rows` query rows of one sequence at positions start .. start + rows - 1; q's rows are
/// heads * headDim wide, and so are context's. The cache holds every position up to the last.
struct AttentionRun {
  KvLayer cache;
  int64_t start, rows;
  const float* q;
  float* context;
};

/// The context rows of every run, in parallel over the runs' KV heads and blocks of rows.
void cachedAttention(const std::vector<AttentionRun>& runs, const AttentionShape& s);

}  // namespace gizml::cpu
