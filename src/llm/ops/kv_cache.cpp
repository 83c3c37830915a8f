#include "llm/ops/kv_cache.h"

#include <gizml/error.h>

#include <typeinfo>

#include "llm/ops/host.h"
#include "llm/ops/kv_layer.h"

namespace gizml::llm::ops {
namespace {

using Store = KvFormat::Store;

int codeBits(Store s) { return s == Store::Bits8 ? 8 : s == Store::Bits4 ? 4 : s == Store::Bits2 ? 2 : 0; }

DType elementType(Store s) { return s == Store::F16 ? DType::F16 : s == Store::BF16 ? DType::BF16 : DType::F32; }

// The side's storage: rows of `count` elements or codes (`rows` of them, shaped as `shape` with
// the last axis in bytes for codes), and for codes their ranges.
KvCache::Side makeSide(Store s, tensor::Shape rows, int64_t count, tensor::Shape ranges) {
  const int bits = codeBits(s);
  if (bits == 0) {
    rows.push_back(count);
    return {tensor::empty(rows, elementType(s)), {}};
  }
  rows.push_back((count * bits + 7) / 8);
  return {tensor::empty(rows, DType::U8), tensor::empty(ranges, DType::F16)};
}

cpu::KvSide sideOf(const KvCache::Side& side, Store s) {
  auto* ranges = side.ranges.ndim() > 0 ? static_cast<uint16_t*>(side.ranges.rawData()) : nullptr;
  return {static_cast<uint8_t*>(side.data.rawData()), ranges, elementType(s), codeBits(s)};
}

}  // namespace

KvCache::KvCache(const void* owner, int64_t layers, int64_t kvHeads, int64_t headDim, int64_t capacity, KvFormat format)
    : owner_(owner), kvHeads_(kvHeads), headDim_(headDim), capacity_(capacity), format_(format) {
  check(capacity > 0, "newState: capacity must be positive, not " + std::to_string(capacity));
  const bool coded = codeBits(format.keys) > 0 || codeBits(format.values) > 0;
  check(!coded || headDim <= cpu::kMaxCodedHead,
        "KV cache: heads of " + std::to_string(headDim) + " values are too long to code in bits (at most " +
            std::to_string(cpu::kMaxCodedHead) + "); use kv \"16\"");
  layers_.resize(static_cast<size_t>(layers));
}

void KvCache::truncate(int64_t n) {
  check(n >= 0 && n <= length_, "truncate: " + std::to_string(n) + " is outside 0.." + std::to_string(length_));
  length_ = n;
}

const KvCache::Layer& KvCache::layer(int64_t i) {
  Layer& l = layers_[static_cast<size_t>(i)];
  if (!holds(i)) {
    l.keys = makeSide(format_.keys, {kvHeads_, headDim_}, capacity_, {kvHeads_, capacity_, 2});
    l.values = makeSide(format_.values, {capacity_, kvHeads_}, headDim_, {capacity_, kvHeads_, 2});
  }
  return l;
}

cpu::KvLayer kvLayer(const char* op, const KvCache& cache, int64_t layer) {
  const KvCache::Layer& l = cache.layer(layer);
  require(!l.keys.data.onGpu() && !l.values.data.onGpu(), [&] {
    return std::string(op) + ": the KV cache is on " + l.keys.data.device() +
           "; the language-model operations have only their CPU implementations so far";
  });
  return {sideOf(l.keys, cache.format().keys), sideOf(l.values, cache.format().values), cache.kvHeads(),
          cache.headDim(), cache.capacity()};
}

bool KvCache::copyFrom(const SequenceState& other) {
  const auto* from = dynamic_cast<const KvCache*>(&other);
  if (!from || typeid(*this) != typeid(KvCache) || typeid(other) != typeid(KvCache)) return false;
  if (from->owner_ != owner_ || from->kvHeads_ != kvHeads_ || from->headDim_ != headDim_ ||
      from->capacity_ != capacity_ || from->format_ != format_ || from->layers_.size() != layers_.size())
    return false;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const auto l = static_cast<int64_t>(i);
    if (!from->holds(l)) continue;
    layer(l);
    cpu::copyKeysValues(kvLayer("copyFrom", *from, l), kvLayer("copyFrom", *this, l), from->length_);
  }
  length_ = from->length_;
  return true;
}

}  // namespace gizml::llm::ops
