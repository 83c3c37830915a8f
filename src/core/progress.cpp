#include "core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace gizml::core {

ProgressBar::ProgressBar(std::string label, int64_t total)
    : label_(std::move(label)), total_(std::max<int64_t>(total, 1)), enabled_(isatty(STDERR_FILENO) != 0) {}

ProgressBar::~ProgressBar() {
  if (enabled_) std::fputs("\n", stderr);
}

void ProgressBar::update(int64_t done, const std::string& item) {
  if (!enabled_) return;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * std::clamp<int64_t>(done, 0, total_) / total_);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  // \r and clear-to-end redraw the line in place.
  std::fprintf(stderr, "\r%s [%s] %3d%% %.50s\033[K", label_.c_str(), bar.c_str(),
               static_cast<int>(100 * done / total_), item.c_str());
  std::fflush(stderr);
}

}  // namespace gizml::core
