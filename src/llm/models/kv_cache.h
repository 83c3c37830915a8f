#pragma once
// One sequence's keys and values for every layer, F32, F16 or BF16, with room for `capacity`
// tokens, allocated when the layer stores its first token (so the layers of a hybrid model that
// keep no keys cost nothing). Values are rows, [capacity, kvHeads, headDim] per layer; keys are
// columns, [kvHeads, headDim, capacity]: the scores q K^T then read K^T as a row-major matrix,
// which sgemm streams in place for a decode step (keys as rows had to be transposed into its
// panels on every step, a quarter of a long context's decode time). Attention reads both as
// stored (widened exactly to f32: cached_attention.h).
#include <gizml/dtype.h>

#include <cstdint>
#include <vector>

#include "core/page_memory.h"
#include "llm/models/language_model.h"

namespace gizml::llm {

class KvCache : public SequenceState {
 public:
  KvCache(const void* owner, int64_t layers, int64_t kvHeads, int64_t headDim, int64_t capacity, DType dtype);

  int64_t length() const override { return length_; }
  int64_t capacity() const override { return capacity_; }
  void truncate(int64_t n) override;
  /// Copies the rows another plain KvCache of the same shape holds (not a subclass's: those
  /// keep more than rows).
  bool copyFrom(const SequenceState& other) override;

  /// The model that made it (a state only fits its own model).
  const void* owner() const { return owner_; }
  /// Set once a forward pass has stored its rows.
  void setLength(int64_t n) { length_ = n; }

  /// Writes the keys and values (kvHeads * headDim each) of the token at `position`.
  void store(int64_t layer, int64_t position, const float* keys, const float* values);
  DType dtype() const { return dtype_; }
  /// The keys of head `head` as columns: headDim rows of capacity() values of dtype(), row d
  /// holding dimension d of every position.
  const void* keyColumns(int64_t layer, int64_t head) const;
  /// Head `head` of the value at `position`: headDim values of dtype().
  const void* value(int64_t layer, int64_t position, int64_t head) const;

 private:

  const void* owner_;
  int64_t kvHeads_, headDim_, capacity_, length_ = 0;
  DType dtype_;
  std::vector<core::PageVector<uint8_t>> keys_, values_;  // per layer (long contexts stream them)
};

}  // namespace gizml::llm
