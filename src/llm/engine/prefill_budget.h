#pragma once
// How many prompt rows an engine step may read beside requests that decode (Engine::
// setPrefillBudget): as many as add the time of a step of those requests alone, so that while a
// long prompt is read in parts they keep at least half their pace. Both times are running
// estimates of the engine's own forward passes, not constants.
#include <cstdint>
#include <map>

namespace gizml::llm {

class PrefillBudget {
 public:
  /// Fewer rows make a step's fixed costs dominate; a prompt always moves on by this many.
  static constexpr int64_t kFloor = 16;
  /// The rows while there is no estimate yet: no step of decoding requests alone, or no prompt
  /// row beside them, has been timed.
  static constexpr int64_t kFirstChunk = 32;
  /// The most, whatever the estimates say (a decode step stalled by the system, timed long, would
  /// otherwise let a whole long prompt into one step).
  static constexpr int64_t kCeiling = 2048;

  /// The prompt rows a step may add to decoding requests that feed decodeRows rows.
  int64_t rows(int64_t decodeRows) const;
  /// A forward pass of decodeRows rows of decoding requests and promptRows of prompts took
  /// seconds.
  void measured(int64_t decodeRows, int64_t promptRows, double seconds);

 private:
  /// The estimated time of a step of decodeRows rows of decoding requests alone: the one timed
  /// with the nearest number of rows. Needs one.
  double decodeSeconds(int64_t decodeRows) const;

  std::map<int64_t, double> decode_;  // by rows: the smoothed time of a step of decoding requests alone
  // Time past the decoding requests' own and the prompt rows that took it, both decayed with
  // each step, so their ratio follows the cost of a row as a prompt's context grows.
  double promptSeconds_ = 0, promptRows_ = 0;
};

}  // namespace gizml::llm
