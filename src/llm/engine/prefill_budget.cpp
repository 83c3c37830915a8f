#include "llm/engine/prefill_budget.h"

#include <algorithm>
#include <iterator>

namespace gizml::llm {

namespace {

constexpr double kDecodeWeight = 0.5;  // of a new decode step's time in its smoothed estimate
constexpr double kPromptDecay = 0.5;   // of the earlier prompt rows' weight with each timed step

}  // namespace

double PrefillBudget::decodeSeconds(int64_t decodeRows) const {
  const auto above = decode_.lower_bound(decodeRows);
  if (above == decode_.end()) return std::prev(above)->second;
  if (above == decode_.begin() || above->first == decodeRows) return above->second;
  const auto below = std::prev(above);
  return decodeRows - below->first <= above->first - decodeRows ? below->second : above->second;
}

int64_t PrefillBudget::rows(int64_t decodeRows) const {
  if (decode_.empty()) return kFirstChunk;
  // Before the check for an estimate of a row: steps whose prompt rows cost less than the noise
  // leave none, and the decoding requests must still be timed alone every few steps.
  if (stepsBeside_ >= kAloneEvery - 1) return 0;
  if (promptRows_ == 0) return kFirstChunk;
  const double rows = decodeSeconds(decodeRows) / (promptSeconds_ / promptRows_);
  return static_cast<int64_t>(std::clamp(rows, static_cast<double>(kFloor), static_cast<double>(kCeiling)));
}

void PrefillBudget::measured(int64_t decodeRows, int64_t promptRows, double seconds) {
  if (decodeRows == 0) return;  // a step of prompts alone: its fixed costs are no cost of a row
  if (promptRows == 0) {
    stepsBeside_ = 0;
    const auto [it, added] = decode_.try_emplace(decodeRows, seconds);
    if (!added) it->second += kDecodeWeight * (seconds - it->second);
    return;
  }
  ++stepsBeside_;
  if (decode_.empty()) return;
  const double extra = seconds - decodeSeconds(decodeRows);
  if (extra <= 0) return;  // noise larger than the rows' cost tells nothing of it
  promptSeconds_ = kPromptDecay * promptSeconds_ + extra;
  promptRows_ = kPromptDecay * promptRows_ + static_cast<double>(promptRows);
}

}  // namespace gizml::llm
