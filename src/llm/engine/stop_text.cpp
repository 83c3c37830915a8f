// Stop strings held back and cut on the decoded text (stop_text.h).
#include "llm/engine/stop_text.h"

#include <algorithm>

namespace gizml::llm {

size_t heldBack(std::string_view text, const std::vector<std::string_view>& markers) {
  size_t best = 0;
  for (std::string_view m : markers)
    for (size_t k = std::min(m.size() - (m.empty() ? 0 : 1), text.size()); k > best; --k)
      if (text.substr(text.size() - k) == m.substr(0, k)) {
        best = k;
        break;
      }
  return best;
}

StopText::StopText(const Tokenizer& tokenizer, std::vector<std::string> stops)
    : decoder_(tokenizer, true), stops_(std::move(stops)) {}

std::string StopText::release() {
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  std::vector<std::string_view> markers(stops_.begin(), stops_.end());
  const size_t keep = heldBack(pending_, markers);
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StopText::push(TokenId token) {
  if (stopped_) return "";
  pending_ += decoder_.push(token);
  return release();
}

std::string StopText::finish() {
  if (stopped_) return "";
  pending_ += decoder_.flush();
  std::string out = release();
  if (!stopped_) out += pending_;
  pending_.clear();
  return out;
}

}  // namespace gizml::llm
