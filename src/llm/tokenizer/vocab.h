#pragma once
// The token table shared by every tokenizer model.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gizml::llm {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
/// A string -> id map that looks up string_views without copying them.
using StringIds = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

inline int32_t lookup(const StringIds& ids, std::string_view key) {
  const auto it = ids.find(key);
  return it == ids.end() ? -1 : it->second;
}

struct Vocab {
  std::vector<std::string> tokens;  // as the vocabulary spells them (e.g. "Ġthe", "▁the", "<0x0A>")
  StringIds ids;                    // tokens -> id
  std::vector<std::string> pieces;  // the bytes each token decodes to
  std::vector<bool> special;        // skipped by decode(skipSpecial)

  void resize(size_t n) {
    tokens.resize(n);
    pieces.resize(n);
    special.resize(n, false);
  }
};

}  // namespace gizml::llm
