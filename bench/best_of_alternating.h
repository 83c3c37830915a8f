#pragma once
// The CPU benchmarks' timing beside an anchor: a warm-up of each, then alternating runs (so both
// see the same load from the rest of the machine) until at least `minRuns` each and `budget`
// seconds in all; the best seconds per call of each.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>

/// Seconds on the wall clock.
inline double wallClock() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// The process's CPU seconds (with one thread, a measure of the work that a busy machine
/// disturbs less: time spent waiting for a core is not counted).
inline double cpuClock() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

inline std::pair<double, double> bestSeconds(const std::function<void()>& ours, const std::function<void()>& theirs,
                                             int minRuns, double budget, double (*clock)() = wallClock) {
  auto seconds = [&](const std::function<void()>& run) {
    const double t0 = clock();
    run();
    return clock() - t0;
  };
  ours();
  theirs();
  double bestOurs = 1e30, bestTheirs = 1e30, total = 0;
  for (int i = 0; i < minRuns || total < budget; ++i) {
    const double s = seconds(ours), t = seconds(theirs);
    bestOurs = std::min(bestOurs, s);
    bestTheirs = std::min(bestTheirs, t);
    total += s + t;
  }
  return {bestOurs, bestTheirs};
}
