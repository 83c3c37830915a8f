#include "grammar/token_mask.h"

#include <algorithm>

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

void TokenMask::walk(const Rules& rules, int32_t node, const std::vector<Matcher::Stack>& stacks,
                     std::vector<bool>& out) const {
  for (const auto& [b, child] : nodes_[static_cast<size_t>(node)].children) {
    const std::vector<Matcher::Stack> next = advanceStacks(rules, stacks, b);
    if (next.empty()) continue;
    for (int32_t id : nodes_[static_cast<size_t>(child)].tokens) out[static_cast<size_t>(id)] = true;
    walk(rules, child, next, out);
  }
}

const std::vector<bool>& TokenMask::allowed(const Matcher& matcher) {
  auto key = std::make_pair(matcher.rules_, matcher.stacks_);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  if (cache_.size() >= kCacheEntries) cache_.clear();
  std::vector<bool> out(vocab_, false);
  walk(*matcher.rules_, 0, matcher.stacks_, out);
  return cache_.emplace(std::move(key), std::move(out)).first->second;
}

}  // namespace gizml::grammar
