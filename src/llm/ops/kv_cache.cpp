#include "llm/ops/kv_cache.h"

#include <gizml/error.h>

#include <typeinfo>

#include "llm/ops/kv_layer.h"

namespace gizml::llm::ops {

KvCache::KvCache(const void* owner, int64_t layers, int64_t kvHeads, int64_t headDim, int64_t capacity, DType dtype)
    : owner_(owner), kvHeads_(kvHeads), headDim_(headDim), capacity_(capacity), dtype_(dtype) {
  check(capacity > 0, "newState: capacity must be positive, not " + std::to_string(capacity));
  check(dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16,
        std::string("KV cache: F32, F16 or BF16, not ") + dtypeName(dtype));
  keys_.resize(static_cast<size_t>(layers));
  values_.resize(static_cast<size_t>(layers));
}

void KvCache::truncate(int64_t n) {
  check(n >= 0 && n <= length_, "truncate: " + std::to_string(n) + " is outside 0.." + std::to_string(length_));
  length_ = n;
}

void KvCache::make(int64_t layer) {
  if (holds(layer)) return;
  keys_[static_cast<size_t>(layer)] = tensor::empty({kvHeads_, headDim_, capacity_}, dtype_);
  values_[static_cast<size_t>(layer)] = tensor::empty({capacity_, kvHeads_, headDim_}, dtype_);
}

const tensor::Tensor& KvCache::keys(int64_t layer) {
  make(layer);
  return keys_[static_cast<size_t>(layer)];
}

const tensor::Tensor& KvCache::values(int64_t layer) {
  make(layer);
  return values_[static_cast<size_t>(layer)];
}

bool KvCache::copyFrom(const SequenceState& other) {
  const auto* from = dynamic_cast<const KvCache*>(&other);
  if (!from || typeid(*this) != typeid(KvCache) || typeid(other) != typeid(KvCache)) return false;
  if (from->owner_ != owner_ || from->kvHeads_ != kvHeads_ || from->headDim_ != headDim_ ||
      from->capacity_ != capacity_ || from->dtype_ != dtype_ || from->keys_.size() != keys_.size())
    return false;
  for (size_t layer = 0; layer < keys_.size(); ++layer) {
    const auto l = static_cast<int64_t>(layer);
    if (!from->holds(l)) continue;
    make(l);
    cpu::copyKeysValues(kvLayer("copyFrom", *from, l), kvLayer("copyFrom", *this, l), from->length_);
  }
  length_ = from->length_;
  return true;
}

}  // namespace gizml::llm::ops
