#include <gizml/tokenizer.h>

#include "llm/tokenizer/tokenizer_impl.h"
#include "llm/tokenizer/unicode.h"

namespace gizml::llm {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skipSpecial)
    : tokenizer_(&tokenizer), skipSpecial_(skipSpecial) {}

std::string StreamDecoder::push(TokenId id) {
  tokenizer_->impl_->appendPiece(pending_, id, skipSpecial_, atStart_);
  // Hold back a trailing character that more bytes could still complete: it starts at the last
  // byte that is not a continuation byte, at most three bytes from the end.
  size_t keep = 0;
  for (size_t k = 1; k <= 3 && k <= pending_.size(); ++k) {
    const size_t start = pending_.size() - k;
    if ((static_cast<unsigned char>(pending_[start]) & 0xC0) != 0x80) {
      if (unicode::incompleteUtf8Length(pending_.data() + start, k) == k) keep = k;
      break;
    }
  }
  std::string text = unicode::toValidUtf8(std::string_view(pending_).substr(0, pending_.size() - keep));
  pending_.erase(0, pending_.size() - keep);
  return text;
}

std::string StreamDecoder::flush() {
  std::string text = unicode::toValidUtf8(pending_);
  pending_.clear();
  atStart_ = true;
  return text;
}

}  // namespace gizml::llm
