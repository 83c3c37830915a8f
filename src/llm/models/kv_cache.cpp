#include "llm/models/kv_cache.h"

#include <gizml/error.h>

#include <cstring>
#include <typeinfo>

namespace gizml::llm {

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

bool KvCache::copyFrom(const SequenceState& other) {
  const auto* from = dynamic_cast<const KvCache*>(&other);
  if (!from || typeid(*this) != typeid(KvCache) || typeid(other) != typeid(KvCache)) return false;
  if (from->owner_ != owner_ || from->kvHeads_ != kvHeads_ || from->headDim_ != headDim_ ||
      from->capacity_ != capacity_ || from->dtype_ != dtype_ || from->keys_.size() != keys_.size())
    return false;
  // The first length_ values of each row: positions of every value row, or of every key column.
  const int64_t size = static_cast<int64_t>(dtypeSize(dtype_)), rowBytes = kvHeads_ * headDim_ * size;
  for (size_t layer = 0; layer < keys_.size(); ++layer) {
    if (from->keys_[layer].empty()) continue;  // a layer that stores no keys
    if (keys_[layer].empty()) keys_[layer].resize(from->keys_[layer].size());
    if (values_[layer].empty()) values_[layer].resize(from->values_[layer].size());
    std::memcpy(values_[layer].data(), from->values_[layer].data(), static_cast<size_t>(from->length_ * rowBytes));
    for (int64_t row = 0; row < kvHeads_ * headDim_; ++row)
      std::memcpy(keys_[layer].data() + row * capacity_ * size, from->keys_[layer].data() + row * capacity_ * size,
                  static_cast<size_t>(from->length_ * size));
  }
  length_ = from->length_;
  return true;
}

void KvCache::store(int64_t layer, int64_t position, const float* keys, const float* values) {
  const int64_t n = kvHeads_ * headDim_;
  for (auto [data, src] : {std::pair{&keys_, keys}, std::pair{&values_, values}}) {
    core::PageVector<uint8_t>& layerData = (*data)[static_cast<size_t>(layer)];
    if (layerData.empty()) layerData.resize(static_cast<size_t>(capacity_ * n) * dtypeSize(dtype_));
    // Element i of the token: at position * n + i of the value rows, at i * capacity + position
    // of the key columns.
    const bool columns = data == &keys_;
    const int64_t at = columns ? position : position * n, stride = columns ? capacity_ : 1;
    if (dtype_ == DType::F32) {
      auto* f = reinterpret_cast<float*>(layerData.data()) + at;
      for (int64_t i = 0; i < n; ++i) f[i * stride] = src[i];
    } else {
      auto* half = reinterpret_cast<uint16_t*>(layerData.data()) + at;
      for (int64_t i = 0; i < n; ++i) half[i * stride] = dtype_ == DType::F16 ? floatToHalf(src[i]) : floatToBf16(src[i]);
    }
  }
}

const void* KvCache::keyColumns(int64_t layer, int64_t head) const {
  return keys_[static_cast<size_t>(layer)].data() + head * headDim_ * capacity_ * dtypeSize(dtype_);
}

const void* KvCache::value(int64_t layer, int64_t position, int64_t head) const {
  return values_[static_cast<size_t>(layer)].data() + ((position * kvHeads_ + head) * headDim_) * dtypeSize(dtype_);
}

}  // namespace gizml::llm
