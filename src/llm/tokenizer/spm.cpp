#include "llm/tokenizer/spm.h"

#include <algorithm>
#include <queue>

namespace gizml::llm {

void tokenizeSpm(const Vocab& vocab, const std::vector<float>& scores, const int32_t* byteIds,
                 std::string_view text, std::vector<int32_t>& out) {
  struct Symbol {
    size_t begin, length;
    int prev, next;
  };
  struct Bigram {
    float score;
    int left, right;
    size_t length;
    bool operator<(const Bigram& o) const { return score != o.score ? score < o.score : left > o.left; }
  };
  std::vector<Symbol> symbols;
  // Characters by their lead byte alone, as llama.cpp splits them (no validation).
  for (size_t i = 0; i < text.size();) {
    static constexpr uint8_t kLength[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    const size_t len = std::min<size_t>(kLength[static_cast<unsigned char>(text[i]) >> 4], text.size() - i);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({i, len, index - 1, i + len < text.size() ? index + 1 : -1});
    i += len;
  }
  std::priority_queue<Bigram> queue;
  auto offer = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    const Symbol& r = symbols[static_cast<size_t>(right)];
    const int32_t id = lookup(vocab.ids, text.substr(l.begin, l.length + r.length));
    if (id < 0 || static_cast<size_t>(id) >= scores.size()) return;
    queue.push({scores[static_cast<size_t>(id)], left, right, l.length + r.length});
  };
  for (size_t i = 1; i < symbols.size(); ++i) offer(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[static_cast<size_t>(b.left)];
    Symbol& r = symbols[static_cast<size_t>(b.right)];
    if (l.length == 0 || r.length == 0 || l.length + r.length != b.length) continue;  // stale
    l.length += r.length;
    r.length = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = b.left;
    offer(l.prev, b.left);
    offer(b.left, l.next);
  }
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& s = symbols[static_cast<size_t>(i)];
    const int32_t id = lookup(vocab.ids, text.substr(s.begin, s.length));
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (size_t k = 0; k < s.length; ++k) {
      const int32_t byte = byteIds[static_cast<unsigned char>(text[s.begin + k])];
      if (byte >= 0) out.push_back(byte);
    }
  }
}

}  // namespace gizml::llm
