#pragma once
// BPE merges by rank, as the `tokenizers` BPE model applies them: repeatedly join the adjacent
// pair with the lowest merge rank, the leftmost one on ties.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gizml::llm {

/// (left id, right id) -> (rank, merged id), in an open-addressing table (the hot lookup of BPE).
class MergeTable {
 public:
  struct Entry {
    uint64_t key;
    uint32_t rank;
    int32_t merged;
  };

  void reserve(size_t merges);
  /// Keeps the first (lowest) rank when a pair repeats.
  void insert(int32_t left, int32_t right, uint32_t rank, int32_t merged);
  const Entry* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = pack(left, right);
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      const Entry& e = slots_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return count_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t pack(int32_t l, int32_t r) {
    return (uint64_t{static_cast<uint32_t>(l)} << 32) | static_cast<uint32_t>(r);
  }
  static size_t hash(uint64_t k) { return static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> 20); }
  void grow();

  std::vector<Entry> slots_;
  size_t mask_ = 0, count_ = 0;
};

/// Merges symbols (token ids) in place.
void mergeByRank(const MergeTable& merges, std::vector<int32_t>& symbols);

}  // namespace gizml::llm
