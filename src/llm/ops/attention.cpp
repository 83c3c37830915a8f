#include "llm/ops/attention.h"

#include <gizml/error.h>

#include "llm/ops/gpu/model_ops_gpu.h"
#include "llm/ops/host.h"
#include "llm/ops/kv_layer.h"

namespace gizml::llm::ops {
namespace {

// Layer `layer` of a cache whose pool is on a GPU, for the kernels there.
gpu::KvPages gpuPages(const KvCache& cache, int64_t layer) {
  const KvPool::Layer& l = cache.pool().layer(layer);
  return {l.keys.data, l.values.data, cache.deviceTable(layer), cache.kvHeads(), cache.headDim(), KvPool::kPageTokens};
}

// The checks of a store of `rows` rows of keys and values at start.. of layer `layer`, and the
// pages made writable.
void prepareStore(KvCache& cache, int64_t layer, int64_t start, int64_t rows, const Tensor& values) {
  require(values.numel() == rows * cache.kvHeads() * cache.headDim(), [&] {
      return "cachedAttention: values " + tensor::shapeText(values.shape()) + " are not " + std::to_string(rows)
             + " rows of " + std::to_string(cache.kvHeads() * cache.headDim()) + ", as the keys";
  });
  require(start >= 0 && start + rows <= cache.capacity(), [&] {
      return "cachedAttention: positions " + std::to_string(start) + ".." + std::to_string(start + rows - 1)
             + " are outside the cache's " + std::to_string(cache.capacity());
  });
  require(cache.holds(layer), [&] { return "cachedAttention: layer " + std::to_string(layer) + " keeps no keys"; });
  cache.makeWritable(start, rows);  // the first layer's store takes the pages; the others find them
}

}  // namespace

void cachedAttention(const std::vector<AttentionRun>& runs, int64_t layer, const AttentionShape& s) {
  std::vector<cpu::AttentionRun> cpuRuns;
  const int64_t qWidth = s.heads * s.headDim;
  for (const AttentionRun& run : runs) {
    const int64_t rows = run.q.numel() / qWidth;
    require(run.q.numel() == rows * qWidth && run.context.numel() == run.q.numel(), [&] {
        return "cachedAttention: q " + tensor::shapeText(run.q.shape()) + " and context "
               + tensor::shapeText(run.context.shape()) + " are not rows of " + std::to_string(qWidth);
    });
    const bool stores = run.keys.numel() > 0;
    const int64_t kvWidth = run.cache->kvHeads() * run.cache->headDim();
    require(!stores || run.keys.numel() == rows * kvWidth, [&] {
      return "cachedAttention: keys " + tensor::shapeText(run.keys.shape()) + " are not " + std::to_string(rows) +
             " rows of " + std::to_string(kvWidth) + ", one for each query row";
    });
    if (stores) prepareStore(*run.cache, layer, run.start, rows, run.values);
    const auto held = static_cast<int64_t>(run.cache->pages().size()) * KvPool::kPageTokens;
    require(run.cache->holds(layer) && run.start + rows <= held, [&] {
        return "cachedAttention: the cache does not hold the keys of positions up to " + std::to_string(run.start
               + rows - 1);
    });
    const Tensor& pool = run.cache->pool().layer(layer).keys.data;
    if (onGpu("cachedAttention", {&run.q, &run.context, &pool, &run.keys, &run.values})) {
      check(run.keyEnd == 0, "cachedAttention: padding masked as keys (keyEnd) runs on the CPU only so far");
      if (stores) {
        checkF32Rows("cachedAttention", run.keys);
        checkF32Rows("cachedAttention", run.values);
        gpu::storeKeysValues(gpuPages(*run.cache, layer), run.start, rows, run.keys, run.values);
      }
      checkF32Rows("cachedAttention", run.q);
      checkF32Rows("cachedAttention", run.context);
      gpu::attention(gpuPages(*run.cache, layer), run.start, rows, run.q, run.context, s.heads, s.scale, s.window);
      continue;
    }
    cpuRuns.push_back({kvLayer("cachedAttention", *run.cache, layer), run.start, rows,
                       hostF32("cachedAttention", run.q), hostF32("cachedAttention", run.context), run.keyEnd,
                       stores ? hostF32("cachedAttention", run.keys) : nullptr,
                       stores ? hostF32("cachedAttention", run.values) : nullptr, kvWidth});
  }
  if (!cpuRuns.empty()) cpu::cachedAttention(cpuRuns, {s.heads, s.kvHeads, s.headDim, s.scale, s.window});
}

}  // namespace gizml::llm::ops
