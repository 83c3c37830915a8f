#include <gizml/error.h>
#include <gizml/tokenizer.h>

#include "llm/tokenizer/byte_level.h"
#include "llm/tokenizer/spm.h"
#include "llm/tokenizer/tokenizer_impl.h"
#include "llm/tokenizer/unicode.h"

namespace gizml::llm {
namespace {

constexpr size_t kMaxCachedWord = 256;               // longer words are rare; don't keep them
constexpr size_t kMaxCacheIds = size_t{1} << 22;

std::string spacesToMeta(std::string_view text, bool prependMeta) {
  std::string out;
  out.reserve(text.size() + 8);
  if (prependMeta) out.append(kSentencePieceSpace);
  for (char c : text) {
    if (c == ' ') {
      out.append(kSentencePieceSpace);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

void Tokenizer::Impl::finish() {
  const size_t n = vocab.tokens.size();
  added.resize(n, false);
  for (int32_t id : prefix) check(id >= 0 && static_cast<size_t>(id) < n, "tokenizer: bad special token id");
  for (int32_t id : suffix) check(id >= 0 && static_cast<size_t>(id) < n, "tokenizer: bad special token id");
  if (bos >= static_cast<int32_t>(n)) bos = -1;
  if (eos >= static_cast<int32_t>(n)) eos = -1;
}

std::string Tokenizer::Impl::normalize(std::string_view text) const {
  switch (normalizer) {
    case Normalizer::nfc:
      return unicode::isNfcQuick(text) ? std::string(text) : unicode::nfc(text);
    case Normalizer::spaceToMeta:
      return spacesToMeta(text, false);
    case Normalizer::prependSpaceToMeta:
      return spacesToMeta(text, true);
    case Normalizer::none:
      break;
  }
  return std::string(text);
}

void Tokenizer::Impl::wordSymbols(std::string_view word, std::vector<int32_t>& symbols) const {
  symbols.clear();
  if (model == Model::byteLevelBpe) {
    // A vocabulary may lack rare bytes (SmolLM2 lacks 21): they are dropped, as `tokenizers` does.
    for (unsigned char b : word)
      if (byteIds[b] >= 0) symbols.push_back(byteIds[b]);
    return;
  }
  bool lastUnk = false;
  for (size_t i = 0; i < word.size();) {
    const unicode::Utf8Char c = unicode::decodeUtf8(word.data() + i, word.size() - i);
    const std::string_view ch = word.substr(i, c.length);
    i += c.length;
    const int32_t id = lookup(vocab.ids, ch);
    if (id >= 0) {
      symbols.push_back(id);
      lastUnk = false;
      continue;
    }
    bool allBytes = byteFallback;
    for (unsigned char b : ch) allBytes = allBytes && byteIds[b] >= 0;
    if (allBytes) {
      for (unsigned char b : ch) symbols.push_back(byteIds[b]);
      lastUnk = false;
    } else if (unk >= 0 && !(fuseUnk && lastUnk)) {
      symbols.push_back(unk);
      lastUnk = true;
    }
  }
}

void Tokenizer::Impl::encodeWord(std::string_view word, std::vector<int32_t>& out, Cache* c) const {
  if (c) {
    const auto it = c->index.find(word);
    if (it != c->index.end()) {
      const auto offset = static_cast<size_t>(it->second);
      out.insert(out.end(), c->ids.begin() + static_cast<ptrdiff_t>(offset),
                 c->ids.begin() + static_cast<ptrdiff_t>(offset + c->lengths[offset]));
      return;
    }
  }
  thread_local std::vector<int32_t> symbols;
  // ignore_merges: a word that is a token as a whole stays whole.
  const int32_t whole =
      ignoreMerges ? lookup(vocab.ids, model == Model::byteLevelBpe ? byteLevelEncode(word) : std::string(word)) : -1;
  if (whole >= 0) {
    symbols.assign(1, whole);
  } else {
    wordSymbols(word, symbols);
    mergeByRank(merges, symbols);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (c && word.size() < kMaxCachedWord) {
    if (c->ids.size() > kMaxCacheIds) {
      c->index.clear();
      c->ids.clear();
      c->lengths.clear();
    }
    const size_t offset = c->ids.size();
    c->index.emplace(word, static_cast<int32_t>(offset));
    c->ids.insert(c->ids.end(), symbols.begin(), symbols.end());
    c->lengths.resize(c->ids.size());
    c->lengths[offset] = static_cast<uint32_t>(symbols.size());
  }
}

void Tokenizer::Impl::encodeText(std::string_view text, bool afterAdded, std::vector<int32_t>& out,
                                 Cache* c) const {
  if (model == Model::spm) {
    std::string escaped = spacesToMeta(text, spacePrefix && afterAdded);
    tokenizeSpm(vocab, scores, byteIds, escaped, out);
    return;
  }
  const std::string normalized = normalize(text);
  thread_local std::vector<AddedTokenMatcher::Segment> segments;
  segments.clear();
  if (normalizedTokens.empty()) {
    segments.push_back({0, normalized.size(), -1});
  } else {
    normalizedTokens.split(normalized, segments);
  }
  thread_local std::vector<Piece> pieces;
  for (const auto& segment : segments) {
    if (segment.id >= 0) {
      out.push_back(segment.id);
      continue;
    }
    const std::string_view part = std::string_view(normalized).substr(segment.begin, segment.end - segment.begin);
    if (model == Model::bpe) {
      encodeWord(part, out, c);
      continue;
    }
    pieces.clear();
    splitPieces(pattern, part, pieces);
    for (const Piece& p : pieces) encodeWord(part.substr(p.begin, p.end - p.begin), out, c);
  }
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool addSpecial) const {
  const Impl& m = *impl_;
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 4);
  if (addSpecial) out = m.prefix;
  std::vector<AddedTokenMatcher::Segment> segments;
  if (m.rawTokens.empty()) {
    segments.push_back({0, text.size(), -1});
  } else {
    m.rawTokens.split(text, segments);
  }
  std::unique_lock lock(m.cache.mutex, std::try_to_lock);
  Impl::Cache* cache = lock.owns_lock() ? &m.cache : nullptr;
  bool afterAdded = true;
  for (const auto& segment : segments) {
    if (segment.id >= 0) {
      out.push_back(segment.id);
      afterAdded = true;
    } else if (segment.end > segment.begin) {
      m.encodeText(text.substr(segment.begin, segment.end - segment.begin), afterAdded, out, cache);
      afterAdded = false;
    }
  }
  if (addSpecial) out.insert(out.end(), m.suffix.begin(), m.suffix.end());
  return out;
}

void Tokenizer::Impl::appendPiece(std::string& out, int32_t id, bool skipSpecial, bool& atStart) const {
  check(id >= 0 && static_cast<size_t>(id) < vocab.pieces.size(),
        "tokenizer: token id " + std::to_string(id) + " out of range");
  const auto index = static_cast<size_t>(id);
  std::string_view p = vocab.pieces[index];
  if (added[index]) {
    if (!(skipSpecial && vocab.special[index])) {
      out.append(p);
      atStart = false;
    }
    if (leadingSpace == LeadingSpace::stripAfterSpecial) atStart = true;
    return;
  }
  if (atStart && leadingSpace != LeadingSpace::keep && !p.empty() && p[0] == ' ') p.remove_prefix(1);
  out.append(p);
  atStart = false;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool skipSpecial) const {
  std::string bytes;
  bool atStart = true;
  for (TokenId id : ids) impl_->appendPiece(bytes, id, skipSpecial, atStart);
  return unicode::toValidUtf8(bytes);
}

TokenId Tokenizer::tokenToId(std::string_view token) const { return lookup(impl_->vocab.ids, token); }

const std::string& Tokenizer::idToToken(TokenId id) const {
  check(id >= 0 && static_cast<size_t>(id) < impl_->vocab.tokens.size(),
        "tokenizer: token id " + std::to_string(id) + " out of range");
  return impl_->vocab.tokens[static_cast<size_t>(id)];
}

std::string Tokenizer::pieceBytes(TokenId id) const {
  check(id >= 0 && static_cast<size_t>(id) < impl_->vocab.tokens.size(),
        "tokenizer: token id " + std::to_string(id) + " out of range");
  std::string bytes;
  bool atStart = false;
  impl_->appendPiece(bytes, id, false, atStart);
  return bytes;
}

bool Tokenizer::isSpecial(TokenId id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->vocab.special.size() && impl_->vocab.special[static_cast<size_t>(id)];
}
size_t Tokenizer::vocabSize() const { return impl_->vocab.tokens.size(); }
TokenId Tokenizer::bos() const { return impl_->bos; }
TokenId Tokenizer::eos() const { return impl_->eos; }

}  // namespace gizml::llm
