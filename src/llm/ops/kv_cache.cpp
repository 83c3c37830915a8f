#include "llm/ops/kv_cache.h"

#include <gizml/error.h>

#include <algorithm>
#include <iterator>
#include <typeinfo>

#include "llm/ops/host.h"
#include "llm/ops/kv_layer.h"

namespace gizml::llm::ops {
namespace {

constexpr int64_t P = KvPool::kPageTokens;

cpu::KvSide sideOf(const KvPool::Side& side, KvFormat::Store s) {
  auto* ranges = side.ranges.ndim() > 0 ? static_cast<uint16_t*>(side.ranges.rawData()) : nullptr;
  return {static_cast<uint8_t*>(side.data.rawData()), ranges, elementType(s), codeBits(s)};
}

}  // namespace

KvCache::KvCache(std::shared_ptr<KvPool> pool, int64_t capacity) : pool_(std::move(pool)), capacity_(capacity) {
  check(capacity > 0, "newState: capacity must be positive, not " + std::to_string(capacity));
}

KvCache::~KvCache() { releasePages(0); }

void KvCache::releasePages(size_t from) {
  for (size_t i = from; i < pages_.size(); ++i) pool_->release(pages_[i]);
  if (from < pages_.size()) tableChanged();
  pages_.resize(std::min(from, pages_.size()));
}

void KvCache::truncate(int64_t n) {
  check(n >= 0 && n <= length_, "truncate: " + std::to_string(n) + " is outside 0.." + std::to_string(length_));
  check(reusable(n) == n, "truncate: " + std::to_string(n) + " cuts into the pictures held from token " +
                              std::to_string(picturesStart_) + " to " + std::to_string(picturesEnd_));
  if (n <= picturesStart_) {
    picturesStart_ = picturesEnd_ = -1;
    positionShift_ = 0;
  }
  length_ = n;
  releasePages(static_cast<size_t>((n + P - 1) / P));
}

int64_t KvCache::reusable(int64_t n) const {
  if (picturesStart_ < 0 || n <= picturesStart_) return n;
  return picturesEnd_ > picturesStart_ && n >= picturesEnd_ ? n : picturesStart_;
}

void KvCache::makeWritable(int64_t start, int64_t rows) {
  const auto first = static_cast<size_t>(start / P), end = static_cast<size_t>((start + rows + P - 1) / P);
  for (size_t i = first; i < end && i < pages_.size(); ++i) {
    if (pool_->users(pages_[i]) == 1) continue;
    const int32_t own = pool_->take();
    pool_->copyPage(*pool_, pages_[i], own);
    pool_->release(pages_[i]);
    pages_[i] = own;
    tableChanged();
  }
  while (pages_.size() < end) {
    pages_.push_back(pool_->take());
    tableChanged();
  }
}

void KvCache::tableChanged() {
  for (DeviceTable& t : deviceTables_) t.stale = true;
}

uint64_t KvCache::deviceTable(int64_t layer) const {
  const gizhw::gpu::Gpu& g = pool_->gpuOf(layer).value();
  auto table = std::find_if(deviceTables_.begin(), deviceTables_.end(), [&](const DeviceTable& t) { return t.gpu == g; });
  if (table == deviceTables_.end()) {
    deviceTables_.push_back({g, g.allocate(static_cast<size_t>((capacity_ + P - 1) / P) * sizeof(int32_t))});
    table = std::prev(deviceTables_.end());
  }
  if (table->stale) {
    // On the stream of the kernels that read it, so those queued before read the old table.
    g.copyToDevice(table->buffer.address(), pages_.data(), pages_.size() * sizeof(int32_t), g.stream());
    table->stale = false;
  }
  return table->buffer.address();
}

int64_t KvCache::pagesToAppend(int64_t tokens) const {
  const auto first = static_cast<size_t>(length_ / P), end = static_cast<size_t>((length_ + tokens + P - 1) / P);
  int64_t copies = 0;
  for (size_t i = first; i < end && i < pages_.size(); ++i) copies += pool_->users(pages_[i]) > 1 ? 1 : 0;
  return copies + static_cast<int64_t>(std::max(end, pages_.size()) - pages_.size());
}

cpu::KvLayer kvLayer(const char* op, const KvCache& cache, int64_t layer) {
  const KvPool::Layer& l = cache.pool().layer(layer);
  require(!l.keys.data.onGpu() && !l.values.data.onGpu(), [&] {
    return std::string(op) + ": the KV cache is on " + l.keys.data.device() +
           "; the language-model operations have only their CPU implementations so far";
  });
  return {sideOf(l.keys, cache.format().keys), sideOf(l.values, cache.format().values), cache.kvHeads(),
          cache.headDim(), cache.pages().data()};
}

bool KvCache::copyFrom(const SequenceState& other) {
  const auto* from = dynamic_cast<const KvCache*>(&other);
  if (!from || typeid(*this) != typeid(KvCache) || typeid(other) != typeid(KvCache)) return false;
  return copyKeysValues(*from);
}

bool KvCache::copyKeysValues(const KvCache& other) {
  const KvCache* from = &other;
  if (from == this) return true;
  if (!pool_->sameLayout(*from->pool_) || from->capacity_ != capacity_) return false;
  // Pages of another pool are copied into this one's: only when it has as many free.
  if (from->pool_ != pool_ && pool_->freePages() < static_cast<int64_t>(from->pages_.size())) return false;
  releasePages(0);
  tableChanged();
  for (int32_t page : from->pages_) {
    if (from->pool_ == pool_) {
      pool_->share(page);
      pages_.push_back(page);
    } else {
      pages_.push_back(pool_->take());
      pool_->copyPage(*from->pool_, page, pages_.back());
    }
  }
  length_ = from->length_;
  picturesStart_ = from->picturesStart_;
  picturesEnd_ = from->picturesEnd_;
  positionShift_ = from->positionShift_;
  return true;
}

}  // namespace gizml::llm::ops
