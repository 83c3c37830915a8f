#pragma once
// Which tokens a grammar allows next: the tokens' bytes in a trie, walked once with the parse
// stacks (a branch ends where no stack takes its byte), remembered for each set of stacks a
// text reaches (JSON comes back to the same few: inside a string, after a comma, ...). A walk
// steps each distinct set of stacks on each byte once (TokenMask::States).
#include <gizml/grammar.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gizml::grammar {

class TokenMask {
 public:
  /// pieces[id]: the bytes token id adds to a text; an empty piece is never allowed (special tokens).
  explicit TokenMask(const std::vector<std::string>& pieces);
  /// allowed[id] after the matcher's text (valid until the next call).
  const std::vector<bool>& allowed(const Matcher& matcher);

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;
    std::vector<int32_t> tokens;  // the tokens whose bytes end here
  };
  class States;
  void walk(States& states, int32_t node, int32_t state, std::vector<bool>& out) const;

  std::vector<Node> nodes_;
  size_t vocab_ = 0;
  // By grammar (kept alive here, so its address stays its own) and stacks; cleared when large.
  std::map<std::pair<std::shared_ptr<const Rules>, std::vector<Matcher::Stack>>, std::vector<bool>> cache_;
};

}  // namespace gizml::grammar
