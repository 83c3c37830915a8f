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
  const KvFormat format = cache.format();
  return {l.keys.data,  l.values.data,  cache.kvHeads(),        cache.headDim(),          KvPool::kPageTokens,
          l.keys.ranges, l.values.ranges, codeBits(format.keys), codeBits(format.values)};
}

// Whether `next` ([rows, width] rows of F32) starts where `before` ends in the same memory.
bool follows(const Tensor& next, const Tensor& before) {
  return next.storage() == before.storage() && next.offset() == before.offset() + before.numel();
}

// rows x width F32 rows from where `first` starts (first and the rows after it that follow it).
Tensor rowsFrom(const Tensor& first, int64_t rows, int64_t width) {
  return {first.storage(), DType::F32, {rows, width}, {width, 1}, first.offset()};
}

// Runs on a GPU, in groups of consecutive runs whose pages are one pool's, whose rows follow
// each other (a pass's sequences: its rows are one tensor's) and whose padding (keyEnd) is the
// same: a group's rows are stored and attend in one launch each, every row at its own place.
void attendOnGpu(const std::vector<const AttentionRun*>& runs, int64_t layer, const AttentionShape& s) {
  const int64_t qWidth = s.heads * s.headDim;
  for (size_t begin = 0; begin < runs.size();) {
    const AttentionRun& head = *runs[begin];
    const KvPool::Layer& pool = head.cache->pool().layer(layer);
    const bool stores = head.keys.numel() > 0;
    const int64_t kvWidth = head.cache->kvHeads() * head.cache->headDim();
    gpu::RowPlaces places;
    size_t end = begin;
    for (; end < runs.size(); ++end) {
      const AttentionRun& run = *runs[end];
      if (end > begin) {
        const AttentionRun& before = *runs[end - 1];
        const bool joins = &run.cache->pool().layer(layer) == &pool && (run.keys.numel() > 0) == stores &&
                           run.keyEnd == head.keyEnd &&
                           follows(run.q, before.q) && follows(run.context, before.context) &&
                           (!stores || (follows(run.keys, before.keys) && follows(run.values, before.values)));
        if (!joins) break;
      }
      const uint64_t table = run.cache->deviceTable(layer);
      for (int64_t r = 0; r < run.q.numel() / qWidth; ++r) {
        places.tables.push_back(table);
        places.positions.push_back(static_cast<int32_t>(run.start + r));
      }
    }
    const auto rows = static_cast<int64_t>(places.positions.size());
    const gpu::KvPages kv = gpuPages(*head.cache, layer);
    if (stores) gpu::storeKeysValues(kv, places, rowsFrom(head.keys, rows, kvWidth), rowsFrom(head.values, rows, kvWidth));
    gpu::attention(kv, places, rowsFrom(head.q, rows, qWidth), rowsFrom(head.context, rows, qWidth), s.heads, s.scale,
                   s.window, head.keyEnd);
    begin = end;
  }
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
  std::vector<const AttentionRun*> gpuRuns;
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
      for (const Tensor* t : {&run.q, &run.context}) checkF32Rows("cachedAttention", *t);
      if (stores)
        for (const Tensor* t : {&run.keys, &run.values}) checkF32Rows("cachedAttention", *t);
      require(run.start + rows <= (int64_t{1} << 31), [] { return std::string("cachedAttention: positions past 2^31"); });
      gpuRuns.push_back(&run);
      continue;
    }
    cpuRuns.push_back({kvLayer("cachedAttention", *run.cache, layer), run.start, rows,
                       hostF32("cachedAttention", run.q), hostF32("cachedAttention", run.context), run.keyEnd,
                       stores ? hostF32("cachedAttention", run.keys) : nullptr,
                       stores ? hostF32("cachedAttention", run.values) : nullptr, kvWidth});
  }
  if (!gpuRuns.empty()) attendOnGpu(gpuRuns, layer, s);
  if (!cpuRuns.empty()) cpu::cachedAttention(cpuRuns, {s.heads, s.kvHeads, s.headDim, s.scale, s.window});
}

}  // namespace gizml::llm::ops
