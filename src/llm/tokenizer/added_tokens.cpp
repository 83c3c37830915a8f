#include "llm/tokenizer/added_tokens.h"

#include "llm/tokenizer/unicode.h"

namespace gizml::llm {
namespace {

// The code point that ends just before byte offset end (skipping back over continuation bytes).
uint32_t charBefore(std::string_view text, size_t end, size_t& begin) {
  begin = end - 1;
  while (begin > 0 && end - begin < 4 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
  const unicode::Utf8Char c = unicode::decodeUtf8(text.data() + begin, end - begin);
  if (begin + c.length != end) {
    begin = end - 1;
    return unicode::kInvalidBase + static_cast<unsigned char>(text[begin]);
  }
  return c.cp;
}

bool isWordChar(uint32_t cp) {
  return cp == '_' || (unicode::properties(cp) & (unicode_data::kLetter | unicode_data::kNumber));
}

}  // namespace

void AddedTokenMatcher::add(const AddedToken& token) {
  if (token.content.empty()) return;
  uint32_t node = 0;
  for (unsigned char byte : token.content) {
    const uint64_t key = uint64_t{node} << 8 | byte;
    auto it = edges_.find(key);
    if (it == edges_.end()) {
      it = edges_.emplace(key, static_cast<uint32_t>(terminal_.size())).first;
      terminal_.push_back(-1);
    }
    node = it->second;
  }
  terminal_[node] = static_cast<int32_t>(tokens_.size());
  firstByte_[static_cast<unsigned char>(token.content[0])] = true;
  tokens_.push_back(token);
}

size_t AddedTokenMatcher::longestAt(std::string_view text, size_t i, size_t& token) const {
  size_t best = 0;
  uint32_t node = 0;
  for (size_t j = i; j < text.size(); ++j) {
    const auto it = edges_.find(uint64_t{node} << 8 | static_cast<unsigned char>(text[j]));
    if (it == edges_.end()) break;
    node = it->second;
    if (terminal_[node] >= 0) {
      best = j + 1 - i;
      token = static_cast<size_t>(terminal_[node]);
    }
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  size_t textStart = 0;  // start of the pending plain text
  size_t i = 0;
  while (i < text.size()) {
    size_t index = 0;
    const size_t length = firstByte_[static_cast<unsigned char>(text[i])] ? longestAt(text, i, index) : 0;
    if (length == 0) {
      ++i;
      continue;
    }
    const AddedToken& token = tokens_[index];
    size_t start = i, stop = i + length;
    if (token.singleWord) {
      size_t before = 0;
      const bool leftOk = start == 0 || !isWordChar(charBefore(text, start, before));
      const bool rightOk =
          stop == text.size() || !isWordChar(unicode::decodeUtf8(text.data() + stop, text.size() - stop).cp);
      if (!leftOk || !rightOk) {
        i = stop;
        continue;
      }
    }
    if (token.lstrip) {
      size_t before = 0;
      while (start > textStart && unicode::isSpace(charBefore(text, start, before))) start = before;
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        const unicode::Utf8Char c = unicode::decodeUtf8(text.data() + stop, text.size() - stop);
        if (!unicode::isSpace(c.cp)) break;
        stop += c.length;
      }
    }
    if (start > textStart) out.push_back({textStart, start, -1});
    out.push_back({start, stop, token.id});
    textStart = i = stop;
  }
  if (textStart < text.size()) out.push_back({textStart, text.size(), -1});
}

}  // namespace gizml::llm
