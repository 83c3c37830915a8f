#include "llm/tokenizer/bpe.h"

#include <limits>
#include <queue>

namespace gizml::llm {

void MergeTable::reserve(size_t merges) {
  size_t capacity = 16;
  while (capacity < merges * 2) capacity *= 2;
  if (capacity <= slots_.size()) return;
  std::vector<Entry> old = std::move(slots_);
  slots_.assign(capacity, Entry{kEmpty, 0, 0});
  mask_ = capacity - 1;
  count_ = 0;
  for (const Entry& e : old) {
    if (e.key != kEmpty) insert(static_cast<int32_t>(e.key >> 32), static_cast<int32_t>(e.key), e.rank, e.merged);
  }
}

void MergeTable::insert(int32_t left, int32_t right, uint32_t rank, int32_t merged) {
  if ((count_ + 1) * 2 > slots_.size()) reserve(count_ + 1);
  const uint64_t key = pack(left, right);
  for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
    Entry& e = slots_[i];
    if (e.key == key) return;
    if (e.key == kEmpty) {
      e = {key, rank, merged};
      ++count_;
      return;
    }
  }
}

namespace {

constexpr uint32_t kNoMerge = std::numeric_limits<uint32_t>::max();

// Short words: keep the rank of every adjacent pair and rescan for the minimum (cheaper than a
// heap below a few dozen symbols).
void mergeShort(const MergeTable& merges, std::vector<int32_t>& s) {
  uint32_t ranks[64];
  auto rankOf = [&](size_t i) {
    const MergeTable::Entry* e = merges.find(s[i], s[i + 1]);
    return e ? e->rank : kNoMerge;
  };
  for (size_t i = 0; i + 1 < s.size(); ++i) ranks[i] = rankOf(i);
  while (s.size() > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < s.size(); ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNoMerge) break;
    s[best] = merges.find(s[best], s[best + 1])->merged;
    s.erase(s.begin() + static_cast<ptrdiff_t>(best) + 1);
    for (size_t i = best + 1; i + 1 < s.size(); ++i) ranks[i] = ranks[i + 1];
    if (best + 1 < s.size()) ranks[best] = rankOf(best);
    if (best > 0) ranks[best - 1] = rankOf(best - 1);
  }
}

// Long words: a heap of candidate merges over a linked list of symbols; entries whose pair has
// changed since they were queued are skipped.
void mergeLong(const MergeTable& merges, std::vector<int32_t>& s) {
  struct Candidate {
    uint32_t rank;
    uint32_t pos;
    int32_t merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  const size_t n = s.size();
  std::vector<int32_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto offer = [&](size_t left, size_t right) {
    if (const MergeTable::Entry* e = merges.find(s[left], s[right]))
      queue.push({e->rank, static_cast<uint32_t>(left), e->merged});
  };
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
    if (i + 1 < n) offer(i, i + 1);
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    if (!alive[top.pos] || next[top.pos] < 0) continue;
    const auto right = static_cast<size_t>(next[top.pos]);
    const MergeTable::Entry* e = merges.find(s[top.pos], s[right]);
    if (!e || e->merged != top.merged) continue;  // stale: the pair here has changed
    s[top.pos] = top.merged;
    alive[right] = false;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[static_cast<size_t>(next[right])] = static_cast<int32_t>(top.pos);
    if (prev[top.pos] >= 0) offer(static_cast<size_t>(prev[top.pos]), top.pos);
    if (next[top.pos] >= 0) offer(top.pos, static_cast<size_t>(next[top.pos]));
  }
  size_t out = 0;
  for (size_t i = 0; i < n; ++i) {
    if (alive[i]) s[out++] = s[i];
  }
  s.resize(out);
}

}  // namespace

void mergeByRank(const MergeTable& merges, std::vector<int32_t>& symbols) {
  if (symbols.size() <= 64) {
    mergeShort(merges, symbols);
  } else {
    mergeLong(merges, symbols);
  }
}

}  // namespace gizml::llm
