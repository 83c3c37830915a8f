#pragma once
// A request's tokens turned into text that is safe to send as it comes: whole UTF-8 characters
// only, cut at the first stop string, never showing the start of one that may still complete.
// The engine keeps one per request (Progress::text), so a server sends what it gets.
#include <gizml/tokenizer.h>

#include <string>
#include <string_view>
#include <vector>

namespace gizml::llm {

/// The longest suffix of text that begins one of the markers (shorter than it), in bytes.
size_t heldBack(std::string_view text, const std::vector<std::string_view>& markers);

class StopText {
 public:
  StopText(const Tokenizer& tokenizer, std::vector<std::string> stops);
  /// The text that token completes and that can no longer be part of a stop string.
  std::string push(TokenId token);
  /// At the end of the request: what was held back (no stop string after all).
  std::string finish();
  /// A stop string was found: the text before it was given, nothing after it will be.
  bool stopped() const { return stopped_; }

 private:
  std::string release();  // takes from pending_ what is safe
  StreamDecoder decoder_;
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace gizml::llm
