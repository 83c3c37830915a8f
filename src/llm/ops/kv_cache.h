#pragma once
// One sequence's keys and values for every layer, as its pool's KvFormat says (F32, F16 or BF16
// elements, or codes of 8, 4 or 2 bits with a scale and an offset per head and token), in pages
// of a KvPool (llm/ops/kv_pool.h): an engine's, shared with its other sequences, or one of its
// own. It holds a table of its pages, takes pages as it grows, gives them back as it shrinks, and
// a copy of it shares its pages until one of them writes there. The operations that write and
// read them are llm/ops/attention.h's.
#include <gizhw/gpu.h>
#include <gizml/kv_format.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "llm/language_model.h"
#include "llm/ops/kv_pool.h"

namespace gizml::llm::ops {

class KvCache : public SequenceState {
 public:
  /// An empty sequence of up to `capacity` tokens in `pool`.
  KvCache(std::shared_ptr<KvPool> pool, int64_t capacity);
  ~KvCache() override;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int64_t length() const override { return length_; }
  int64_t capacity() const override { return capacity_; }
  /// Forgets the tokens from n on; the pages past them go back to the pool.
  void truncate(int64_t n) override;
  /// Holds what another plain KvCache of the same model, shape and capacity holds (a subclass,
  /// which keeps more than keys and values, copies its own kind): its pages, shared when both
  /// are in one pool, else copied.
  bool copyFrom(const SequenceState& other) override;
  int64_t memoryBytes() const override {
    return static_cast<int64_t>(pages_.size()) * (pool_->bytes() / pool_->pages());
  }

  int64_t pagesToAppend(int64_t tokens) const override;
  /// n, or where its first picture starts when n cuts into its pictures (their positions moved
  /// the later tokens' ones: a prefix keeps all of them or none).
  int64_t reusable(int64_t n) const override;

  /// How far a multimodal RoPE's positions run from the tokens' indices after the pictures held
  /// (transformers' rope_deltas): token i past them is at position i + positionShift().
  int64_t positionShift() const { return positionShift_; }
  /// A picture starts at token `first` (one after those held: a feed's).
  void pictureStarted(int64_t first) {
    if (picturesStart_ < 0) picturesStart_ = first;
  }
  /// A picture ends at token `end`; the positions from there on run `shift` from the indices.
  void pictureEnded(int64_t end, int64_t shift) {
    picturesEnd_ = end;
    positionShift_ = shift;
  }

  /// The model that made it (a state only fits its own model).
  const void* owner() const { return pool_->owner(); }
  /// Set once a forward pass has stored its rows.
  void setLength(int64_t n) { length_ = n; }

  KvFormat format() const { return pool_->format(); }
  int64_t kvHeads() const { return pool_->kvHeads(); }
  int64_t headDim() const { return pool_->headDim(); }
  const KvPool& pool() const { return *pool_; }
  /// Its pages, in the order of its positions (position p is in pages()[p / kPageTokens]).
  const std::vector<int32_t>& pages() const { return pages_; }
  /// Whether layer `layer` keeps keys (a layer without attention keeps none).
  bool holds(int64_t layer) const { return pool_->holds(layer); }
  /// Makes positions start .. start + rows - 1 its own to write: pages taken for those past its
  /// table, and a copy of each page there that it shares. An Error when the pool has no page free.
  /// Once they are, storing there (ops::cachedAttention's new keys) changes nothing the pool's other states
  /// see, so states of one pool may store side by side.
  void makeWritable(int64_t start, int64_t rows);
  /// Its page table on the GPU of layer `layer`'s pages (which must be on one): one copy a GPU
  /// that every layer's kernels there read in a step, uploaded again only after its pages changed.
  uint64_t deviceTable(int64_t layer) const;

 protected:
  /// The keys and values of `from` (copyFrom's part for every kind): false, and no change, where
  /// its layout or capacity differ or this pool lacks the pages for a copy from another.
  bool copyKeysValues(const KvCache& from);

 private:
  void releasePages(size_t from);

  std::shared_ptr<KvPool> pool_;
  int64_t capacity_, length_ = 0;
  int64_t picturesStart_ = -1, picturesEnd_ = -1;  // -1: none
  int64_t positionShift_ = 0;
  std::vector<int32_t> pages_;
  // The page table where the pool's layers are: one a GPU (several for a model in stages).
  struct DeviceTable {
    gizhw::gpu::Gpu gpu;
    gizhw::gpu::Buffer buffer;  // room for the table at its capacity
    bool stale = true;          // pages_ changed since the last upload
  };
  void tableChanged();
  mutable std::vector<DeviceTable> deviceTables_;
};

}  // namespace gizml::llm::ops
