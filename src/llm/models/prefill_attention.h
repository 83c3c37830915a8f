#pragma once
// Causal attention of a run of consecutive query rows of one sequence (a prefill), computed by
// blocks of query rows: the scores of a block against every key it may see are one sgemm, the
// softmax runs over each row's own keys (causal, and the sliding window if any), and the context
// is another sgemm. A row-by-row pass reads every key once per query row through dot products;
// here the products are matrix products, which is what makes long prompts fast.
#include <cstdint>

#include "llm/models/kv_cache.h"
#include "llm/models/layers.h"

namespace gizml::llm {

/// Whether prefillAttention serves `rows` query rows over this cache (an F32 cache and enough
/// rows to fill a block; other cases take the row-by-row path).
bool prefillAttentionFits(const KvCache& cache, int64_t rows);

/// context rows [0, rows) = attention of q's rows (each heads * headDim wide, positions start ..
/// start + rows - 1) over the cache's keys and values of `layer`, which hold every position up
/// to start + rows - 1. Parallel over KV heads and blocks of rows.
void prefillAttention(const KvCache& cache, int64_t layer, const AttentionShape& s, int64_t start, int64_t rows,
                      const float* q, float* context);

}  // namespace gizml::llm
