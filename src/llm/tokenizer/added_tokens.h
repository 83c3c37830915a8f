#pragma once
// Added and special tokens: found in the text before anything else (leftmost, then longest
// match), with the lstrip / rstrip / single_word options of the `tokenizers` package.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gizml::llm {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;      // the match swallows whitespace on its left
  bool rstrip = false;      // ... and on its right
  bool singleWord = false;  // only matches between non-word characters
  bool normalized = false;  // matched in the normalized text instead of the raw one
};

class AddedTokenMatcher {
 public:
  void add(const AddedToken& token);
  bool empty() const { return tokens_.empty(); }

  /// A stretch of text, or (id >= 0) a matched token covering [begin, end).
  struct Segment {
    size_t begin, end;
    int32_t id;
  };
  /// Appends the segments of text in order; they cover it entirely.
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  // The length of the longest token starting at text[i] (0 if none) and its index in tokens_.
  size_t longestAt(std::string_view text, size_t i, size_t& token) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<uint64_t, uint32_t> edges_;  // (node << 8 | byte) -> child node
  std::vector<int32_t> terminal_{-1};             // node -> index in tokens_ or -1
  bool firstByte_[256] = {};
};

}  // namespace gizml::llm
