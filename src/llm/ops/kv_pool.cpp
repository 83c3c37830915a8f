#include "llm/ops/kv_pool.h"

#include <gizml/error.h>

#include <numeric>
#include <utility>

#include "cpu/kv_attention.h"
#include "tensor/gpu/tensor_ops.h"

namespace gizml::llm::ops {
namespace {

static_assert(KvPool::kPageTokens == cpu::kKvPageTokens, "the pool's pages are the CPU layout's");

using Store = KvFormat::Store;

// One side's pages: rows of `count` elements or codes (the last axis of `rows` in bytes for
// codes), and for codes their ranges.
KvPool::Side makeSide(Store s, tensor::Shape rows, int64_t count, const tensor::Shape& ranges,
                      const std::optional<gizhw::gpu::Gpu>& gpu) {
  const int bits = codeBits(s);
  if (bits == 0) {
    rows.push_back(count);
    return {gpu ? gpuops::empty(rows, elementType(s), gpu->device()) : tensor::empty(rows, elementType(s)), {}};
  }
  rows.push_back((count * bits + 7) / 8);
  if (gpu) return {gpuops::empty(rows, DType::U8, gpu->device()), gpuops::empty(ranges, DType::F16, gpu->device())};
  return {tensor::empty(rows, DType::U8), tensor::empty(ranges, DType::F16)};
}

int64_t tensorBytes(const tensor::Tensor& t) {
  return t.ndim() > 0 ? static_cast<int64_t>(dtypeBytes(t.dtype(), t.numel())) : 0;
}

int64_t sideBytes(const KvPool::Side& side) { return tensorBytes(side.data) + tensorBytes(side.ranges); }

// Page `page` of a side's tensor (its first axis).
tensor::Tensor pageOf(const tensor::Tensor& t, int32_t page) { return t.slice(0, page, page + 1); }

// `page` where `like` is: copied between host memory and a GPU when they differ (a parked state
// in host memory and a pool on the GPU).
tensor::Tensor onDeviceOf(const tensor::Tensor& page, const tensor::Tensor& like) {
  if (like.onGpu() == page.onGpu()) return page;
  return like.onGpu() ? page.on(gizhw::gpu::Gpu(like.storage()->gpu())) : page.host();
}

}  // namespace

int codeBits(Store s) { return KvFormat::bits(s) <= 8 ? KvFormat::bits(s) : 0; }

DType elementType(Store s) { return s == Store::F16 ? DType::F16 : s == Store::BF16 ? DType::BF16 : DType::F32; }

KvPool::KvPool(const void* owner, const std::vector<bool>& attends, int64_t kvHeads, int64_t headDim, KvFormat format,
               int64_t pages, std::vector<std::optional<gizhw::gpu::Gpu>> places)
    : owner_(owner), kvHeads_(kvHeads), headDim_(headDim), format_(format), places_(std::move(places)) {
  check(pages > 0 && pages <= INT32_MAX, "KV pool: " + std::to_string(pages) + " pages is not a positive count");
  if (places_.empty()) places_.resize(attends.size());
  check(places_.size() == attends.size(), "KV pool: " + std::to_string(places_.size()) + " places for " +
                                              std::to_string(attends.size()) + " layers");
  const bool coded = codeBits(format.keys) > 0 || codeBits(format.values) > 0;
  check(!coded || headDim <= cpu::kMaxCodedHead,
        "KV cache: heads of " + std::to_string(headDim) + " values are too long to code in bits (at most " +
            std::to_string(cpu::kMaxCodedHead) + "); use kv \"16\"");
  const int64_t p = kPageTokens;
  for (size_t i = 0; i < attends.size(); ++i) {
    index_.push_back(attends[i] ? static_cast<int32_t>(layers_.size()) : -1);
    if (!attends[i]) continue;
    const std::optional<gizhw::gpu::Gpu>& gpu = places_[i];
    layers_.push_back({makeSide(format.keys, {pages, kvHeads, headDim}, p, {pages, kvHeads, p, 2}, gpu),
                       makeSide(format.values, {pages, p, kvHeads}, headDim, {pages, p, kvHeads, 2}, gpu)});
  }
  users_.assign(static_cast<size_t>(pages), 0);
  free_.resize(static_cast<size_t>(pages));
  std::iota(free_.rbegin(), free_.rend(), 0);  // page 0 is taken first
}

int64_t KvPool::bytes() const {
  int64_t total = 0;
  for (const Layer& l : layers_) total += sideBytes(l.keys) + sideBytes(l.values);
  return total;
}

int32_t KvPool::take() {
  check(!free_.empty(), "KV pool: all " + std::to_string(pages()) + " pages (" + std::to_string(pages() * kPageTokens) +
                            " tokens) are in use");
  const int32_t page = free_.back();
  free_.pop_back();
  users_[static_cast<size_t>(page)] = 1;
  return page;
}

void KvPool::share(int32_t page) { ++users_[static_cast<size_t>(page)]; }

void KvPool::release(int32_t page) {
  if (--users_[static_cast<size_t>(page)] == 0) free_.push_back(page);
}

bool KvPool::sameLayout(const KvPool& other) const {
  return owner_ == other.owner_ && kvHeads_ == other.kvHeads_ && headDim_ == other.headDim_ &&
         format_ == other.format_ && index_ == other.index_;
}

void KvPool::copyPage(const KvPool& source, int32_t from, int32_t to) {
  for (size_t i = 0; i < layers_.size(); ++i)
    for (auto [into, of] : {std::pair{&layers_[i].keys, &source.layers_[i].keys},
                            std::pair{&layers_[i].values, &source.layers_[i].values}}) {
      tensor::assign(pageOf(into->data, to), onDeviceOf(pageOf(of->data, from), into->data));
      if (into->ranges.ndim() > 0)
        tensor::assign(pageOf(into->ranges, to), onDeviceOf(pageOf(of->ranges, from), into->ranges));
    }
}

}  // namespace gizml::llm::ops
