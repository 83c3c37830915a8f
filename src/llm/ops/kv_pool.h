#pragma once
// The pages that hold the keys and values of sequences (llm/ops/kv_cache.h): an engine's pool,
// which its slots share, or a state's own. A page holds kPageTokens positions of every layer
// that attends, laid out as cpu/kv_attention.h says; a sequence holds a table of its pages. A
// page may serve several sequences (a shared start of their prompts): it counts its users, and a
// sequence that writes into a page it shares first takes a copy of its own.
#include <gizml/kv_format.h>
#include <gizml/tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "llm/language_model.h"

namespace gizml::llm::ops {

/// Bits of a stored code (8, 4, 2), or 0 where keys or values are kept as elements.
int codeBits(KvFormat::Store s);
/// The dtype of stored elements (F32, F16, BF16; F32 for codes, which widen to it).
DType elementType(KvFormat::Store s);

class KvPool final : public StatePool {
 public:
  /// Positions per page: whole k blocks of the CPU's products over keys (cpu/kv_attention.h).
  static constexpr int64_t kPageTokens = 256;

  /// `pages` pages for the layers that `attends` marks (the others keep no keys), made by the
  /// model `owner` (a state fits only its own model). places[i]: where layer i's pages are, host
  /// memory (nullopt) or a GPU, in the same layout either way (a page copies between them as it
  /// is); a model in stages across GPUs puts each stage's layers on its own. Empty: all in host
  /// memory.
  KvPool(const void* owner, const std::vector<bool>& attends, int64_t kvHeads, int64_t headDim, KvFormat format,
         int64_t pages, std::vector<std::optional<gizhw::gpu::Gpu>> places = {});

  int64_t pageTokens() const override { return kPageTokens; }
  int64_t pages() const override { return static_cast<int64_t>(users_.size()); }
  int64_t freePages() const override { return static_cast<int64_t>(free_.size()); }
  int64_t bytes() const override;
  KvFormat format() const override { return format_; }

  const void* owner() const { return owner_; }
  int64_t kvHeads() const { return kvHeads_; }
  int64_t headDim() const { return headDim_; }
  /// Where layer `layer`'s pages are (and the states a model keeps beside them): a GPU, or host
  /// memory (nullopt).
  const std::optional<gizhw::gpu::Gpu>& gpuOf(int64_t layer) const { return places_[static_cast<size_t>(layer)]; }
  /// Where its last layer is (the MTP layer's where the model has one): the final hidden states'.
  const std::optional<gizhw::gpu::Gpu>& lastGpu() const { return places_.back(); }

  /// A free page, with one user; an Error naming the pool's size when none is free.
  int32_t take();
  /// One more user of a taken page.
  void share(int32_t page);
  /// One user fewer; the page is free once it has none.
  void release(int32_t page);
  int32_t users(int32_t page) const { return users_[static_cast<size_t>(page)]; }
  /// Every layer's keys and values of page `from` of `source` (a pool of the same layout: this
  /// one, or another state's) into page `to`.
  void copyPage(const KvPool& source, int32_t from, int32_t to);

  /// One layer's keys or values, a page after another: the elements or codes, and for codes
  /// their ranges (an F16 scale and offset per head and token).
  struct Side {
    tensor::Tensor data, ranges;
  };
  struct Layer {
    Side keys, values;
  };
  /// Whether layer `layer` keeps keys (it attends).
  bool holds(int64_t layer) const {
    return layer >= 0 && layer < static_cast<int64_t>(index_.size()) && index_[static_cast<size_t>(layer)] >= 0;
  }
  /// The pages of a layer that holds keys.
  const Layer& layer(int64_t layer) const { return layers_[static_cast<size_t>(index_[static_cast<size_t>(layer)])]; }
  /// Whether `other` lays its pages out as this pool does (its pages copy into this one's).
  bool sameLayout(const KvPool& other) const;

 private:
  const void* owner_;
  int64_t kvHeads_, headDim_;
  KvFormat format_;
  std::vector<std::optional<gizhw::gpu::Gpu>> places_;  // per model layer
  std::vector<int32_t> index_;  // per model layer: its place in layers_, -1 where it keeps no keys
  std::vector<Layer> layers_;
  std::vector<int32_t> users_;  // per page
  std::vector<int32_t> free_;   // pages without users, the next one taken last
};

}  // namespace gizml::llm::ops
