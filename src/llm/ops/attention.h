#pragma once
// A language model's attention over its sequences' KV caches (llm/ops/kv_cache.h), on F32 row
// tensors: the rows' keys and values into the caches, then causal (optionally sliding-window)
// softmax attention of each query head over its KV head's keys (grouped-query). CPU
// implementation: cpu/kv_attention.h, whose blocked path makes a row's context the same bits
// whatever the rows beside it.
#include <gizml/tensor.h>

#include <cstdint>
#include <vector>

#include "llm/ops/kv_cache.h"

namespace gizml::llm::ops {

using tensor::Tensor;

struct AttentionShape {
  int64_t hidden, heads, kvHeads, headDim;
  float scale;         // of the scores: 1/sqrt(headDim), or Gemma's query_pre_attn_scalar
  int64_t window = 0;  // sliding window (the key at distance window - 1 is the oldest); 0: none
};

/// One sequence's query rows q ([rows, heads headDim]) at positions start .. start + rows - 1,
/// and where their context rows go (the same shape). Its cache holds every position up to the
/// last, or is given the rows' own keys and values to store there first.
/// keyEnd > 0: no row sees the keys at or past it (padding).
struct AttentionRun {
  KvCache* cache;
  int64_t start;
  Tensor q, context;
  int64_t keyEnd = 0;
  /// When they have elements: the rows' own keys and values ([rows, kvHeads headDim] each), stored
  /// at their positions first (on the CPU, a decode step's by the tasks that then read them).
  Tensor keys, values;
};

/// The context rows of every run over layer `layer` of its cache.
void cachedAttention(const std::vector<AttentionRun>& runs, int64_t layer, const AttentionShape& s);

}  // namespace gizml::llm::ops
