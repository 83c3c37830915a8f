#pragma once
// How many prompt rows an engine step may read beside requests that decode (Engine::
// setPrefillBudget): as many as add the time of a step of those requests alone, so that while a
// long prompt is read in parts they keep at least half their pace. Both times are running
// estimates of the engine's own forward passes, not constants.
#include <gizml/llm.h>

#include <cstdint>
#include <map>

namespace gizml::llm {

class PrefillBudget {
 public:
  /// A prompt always moves on by at least a row. Small parts read a prompt slowly (a step's
  /// fixed costs dominate), but the decoding requests' pace comes first: with a floor of 16,
  /// SmolLM2's 4 decoding requests (5 ms a step) fell to a tenth of their pace beside a long
  /// prompt (bench_prefill_budget).
  static constexpr int64_t kFloor = 1;
  /// The rows while there is no estimate yet: no step of decoding requests alone, or no prompt
  /// row beside them, has been timed.
  static constexpr int64_t kFirstChunk = 32;
  /// The most, whatever the estimates say (a decode step stalled by the system, timed long, would
  /// otherwise let a whole long prompt into one step): an engine step's prompt rows at most.
  static constexpr int64_t kCeiling = kPromptRowsPerStep;
  /// While prompts are read beside decoding requests, every this many steps one is theirs
  /// alone: it times them afresh, as their steps grow slower with their contexts (else that
  /// growth would be taken for the prompt rows' cost, and the parts would shrink to nothing).
  static constexpr int64_t kAloneEvery = 4;

  /// The prompt rows a step may add to decoding requests that feed decodeRows rows: 0 for a
  /// step of theirs alone (kAloneEvery).
  int64_t rows(int64_t decodeRows) const;
  /// A forward pass of decodeRows rows of decoding requests and promptRows of prompts took
  /// seconds.
  void measured(int64_t decodeRows, int64_t promptRows, double seconds);

 private:
  /// The estimated time of a step of decodeRows rows of decoding requests alone: the one timed
  /// with the nearest number of rows. Needs one.
  double decodeSeconds(int64_t decodeRows) const;

  int64_t stepsBeside_ = 0;  // steps with prompt rows since the last of decoding requests alone
  std::map<int64_t, double> decode_;  // by rows: the smoothed time of a step of decoding requests alone
  // Time past the decoding requests' own and the prompt rows that took it, both decayed with
  // each step, so their ratio follows the cost of a row as a prompt's context grows.
  double promptSeconds_ = 0, promptRows_ = 0;
};

}  // namespace gizml::llm
