#pragma once
// A one-line progress bar on stderr, drawn only when stderr is a terminal (logs and tests stay
// clean).
#include <cstdint>
#include <string>

namespace gizml::core {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// Moves to done of total, naming the current item.
  void update(int64_t done, const std::string& item);

 private:
  std::string label_;
  int64_t total_;
  bool enabled_;
};

}  // namespace gizml::core
