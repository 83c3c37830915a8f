#pragma once
// Causal attention of runs of consecutive query rows (each run one sequence's rows of a pass: a
// prefill, a decode step, drafts) over their KV caches, by blocks of query rows: a block's
// scores against every key it may see are one sgemm, the softmax runs over each row's own keys
// (causal, and the sliding window if any), and the context is another sgemm.
//
// Every row, alone or in a block of 32, goes through this one path, so its context is the same
// bits whatever the rows beside it (docs/architecture.md, "Batch invariance"): sgemm's sums per
// element do not depend on the product's shape (cpu/gemm.h), masked keys add exact zeros, and a
// block's keys start at a multiple of sgemm's k block (kGemmKc), so that a row's sums over keys
// break into the same k blocks in any block of rows. Keys and values are read as the cache
// stores them (16-bit caches widened exactly to f32), the rows of this pass included.
#include <cstdint>
#include <vector>

#include "llm/models/kv_cache.h"
#include "llm/models/layers.h"

namespace gizml::llm {

/// `rows` query rows of one sequence at positions start .. start + rows - 1; q's rows are
/// heads * headDim wide, and so are context's. The cache holds every position up to the last.
struct AttentionRun {
  const KvCache* cache;
  int64_t start, rows;
  const float* q;
  float* context;
};

/// The context rows of every run over layer `layer` of its cache, in parallel over the runs' KV
/// heads and blocks of rows.
void cachedAttention(const std::vector<AttentionRun>& runs, int64_t layer, const AttentionShape& s);

}  // namespace gizml::llm
