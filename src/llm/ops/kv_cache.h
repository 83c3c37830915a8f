#pragma once
// One sequence's keys and values for every layer, F32, F16 or BF16, with room for `capacity`
// tokens, each layer's two tensors made when the layer stores its first token (so the layers of
// a hybrid model that keep no keys cost nothing). Values are rows, [capacity, kvHeads, headDim]
// per layer; keys are columns, [kvHeads, headDim, capacity] (why: cpu/kv_attention.h). The
// operations that write and read them are llm/ops/attention.h's.
#include <gizml/dtype.h>
#include <gizml/tensor.h>

#include <cstdint>
#include <vector>

#include "llm/language_model.h"

namespace gizml::llm::ops {

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

  DType dtype() const { return dtype_; }
  int64_t kvHeads() const { return kvHeads_; }
  int64_t headDim() const { return headDim_; }
  /// Layer `layer`'s key columns and value rows, made (zeroed) on first use.
  const tensor::Tensor& keys(int64_t layer);
  const tensor::Tensor& values(int64_t layer);
  /// Whether the layer holds any (a layer without attention never does).
  bool holds(int64_t layer) const { return keys_[static_cast<size_t>(layer)].ndim() == 3; }
  const tensor::Tensor& keys(int64_t layer) const { return keys_[static_cast<size_t>(layer)]; }
  const tensor::Tensor& values(int64_t layer) const { return values_[static_cast<size_t>(layer)]; }

 private:
  void make(int64_t layer);

  const void* owner_;
  int64_t kvHeads_, headDim_, capacity_, length_ = 0;
  DType dtype_;
  std::vector<tensor::Tensor> keys_, values_;  // per layer; 0-d until the layer stores a token
};

}  // namespace gizml::llm::ops
