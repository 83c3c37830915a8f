#pragma once
// One sequence's keys and values for every layer, as its KvFormat says (F32, F16 or BF16
// elements, or codes of 8, 4 or 2 bits with a scale and an offset per head and token), with room
// for `capacity` tokens, each layer's tensors made when the layer stores its first token (so the
// layers of a hybrid model that keep no keys cost nothing). Values are rows, [capacity, kvHeads,
// headDim] per layer; keys are columns, [kvHeads, headDim, capacity] (why, and how codes pack:
// cpu/kv_attention.h). The operations that write and read them are llm/ops/attention.h's.
#include <gizml/dtype.h>
#include <gizml/kv_format.h>
#include <gizml/tensor.h>

#include <cstdint>
#include <vector>

#include "llm/language_model.h"

namespace gizml::llm::ops {

class KvCache : public SequenceState {
 public:
  KvCache(const void* owner, int64_t layers, int64_t kvHeads, int64_t headDim, int64_t capacity, KvFormat format);

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

  const KvFormat& format() const { return format_; }
  int64_t kvHeads() const { return kvHeads_; }
  int64_t headDim() const { return headDim_; }

  /// One layer's keys or values: the elements or codes, and for codes their ranges (F16 scale
  /// and offset per head and token).
  struct Side {
    tensor::Tensor data, ranges;
  };
  struct Layer {
    Side keys, values;
  };
  /// Layer `layer`'s tensors, made (zeroed) on first use.
  const Layer& layer(int64_t layer);
  const Layer& layer(int64_t layer) const { return layers_[static_cast<size_t>(layer)]; }
  /// Whether the layer holds any (a layer without attention never does).
  bool holds(int64_t layer) const { return layers_[static_cast<size_t>(layer)].keys.data.ndim() > 0; }

 private:
  const void* owner_;
  int64_t kvHeads_, headDim_, capacity_, length_ = 0;
  KvFormat format_;
  std::vector<Layer> layers_;  // 0-d tensors until the layer stores a token
};

}  // namespace gizml::llm::ops
