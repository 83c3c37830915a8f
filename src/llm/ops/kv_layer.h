#pragma once
// The CPU kernels' view of one layer of a KvCache (llm/ops only).
#include "cpu/kv_attention.h"
#include "llm/ops/kv_cache.h"

namespace gizml::llm::ops {

/// Layer `layer` of `cache` (which holds it) as cpu/kv_attention.h lays it out; an Error naming
/// `op` when its tensors are not in host memory.
cpu::KvLayer kvLayer(const char* op, const KvCache& cache, int64_t layer);

}  // namespace gizml::llm::ops
