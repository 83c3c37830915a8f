#include "grammar/token_mask.h"

#include <algorithm>
#include <array>

#include "grammar/rules.h"
#include "grammar/stacks.h"

namespace gizml::grammar {

namespace {
constexpr size_t kCacheEntries = 256;
}

TokenMask::TokenMask(const std::vector<std::string>& pieces) : vocab_(pieces.size()) {
  nodes_.emplace_back();
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (pieces[id].empty()) continue;
    int32_t at = 0;
    for (char c : pieces[id]) {
      const auto b = static_cast<unsigned char>(c);
      auto& kids = nodes_[static_cast<size_t>(at)].children;
      const auto it = std::find_if(kids.begin(), kids.end(), [&](const auto& k) { return k.first == b; });
      if (it != kids.end()) {
        at = it->second;
        continue;
      }
      const auto next = static_cast<int32_t>(nodes_.size());
      nodes_[static_cast<size_t>(at)].children.emplace_back(b, next);
      nodes_.emplace_back();
      at = next;
    }
    nodes_[static_cast<size_t>(at)].tokens.push_back(static_cast<int32_t>(id));
  }
}

// The sets of stacks one walk reaches, numbered, with each one's step on every byte found once:
// inside a JSON string almost every byte leads back to the same set, so the trie's hundreds of
// thousands of nodes cost a table lookup each.
class TokenMask::States {
 public:
  States(const Rules& rules, const std::vector<Matcher::Stack>& start) : rules_(rules) { id(start); }

  // The state after byte b from state s; -1 when no stack takes b.
  int32_t next(int32_t s, unsigned char b) {
    int32_t to = steps_[static_cast<size_t>(s)][b];
    if (to == kUnknown) {
      const std::vector<Matcher::Stack> after = advanceStacks(rules_, sets_[static_cast<size_t>(s)], b);
      to = after.empty() ? -1 : id(after);  // may add a row to steps_: index it again after
      steps_[static_cast<size_t>(s)][b] = to;
    }
    return to;
  }

 private:
  static constexpr int32_t kUnknown = -2;
  int32_t id(const std::vector<Matcher::Stack>& set) {
    const auto [it, fresh] = ids_.emplace(set, static_cast<int32_t>(sets_.size()));
    if (fresh) {
      sets_.push_back(set);
      steps_.emplace_back();
      steps_.back().fill(kUnknown);
    }
    return it->second;
  }
  const Rules& rules_;
  std::map<std::vector<Matcher::Stack>, int32_t> ids_;
  std::vector<std::vector<Matcher::Stack>> sets_;
  std::vector<std::array<int32_t, 256>> steps_;
};

void TokenMask::walk(States& states, int32_t node, int32_t state, std::vector<bool>& out) const {
  for (const auto& [b, child] : nodes_[static_cast<size_t>(node)].children) {
    const int32_t next = states.next(state, b);
    if (next < 0) continue;
    for (int32_t id : nodes_[static_cast<size_t>(child)].tokens) out[static_cast<size_t>(id)] = true;
    walk(states, child, next, out);
  }
}

const std::vector<bool>& TokenMask::allowed(const Matcher& matcher) {
  auto key = std::make_pair(matcher.rules_, matcher.stacks_);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  if (cache_.size() >= kCacheEntries) cache_.clear();
  std::vector<bool> out(vocab_, false);
  States states(*matcher.rules_, matcher.stacks_);
  walk(states, 0, 0, out);
  return cache_.emplace(std::move(key), std::move(out)).first->second;
}

}  // namespace gizml::grammar
