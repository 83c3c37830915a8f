#pragma once
// GPU timing the GPU benchmarks share: the median of `reps` runs of body between two events on
// the GPU's stream, after one warm-up run (compilation, module load, allocator).
#include <gizhw/gpu.h>

#include <algorithm>
#include <functional>
#include <vector>

inline double medianMs(gizhw::gpu::Gpu& g, int reps, const std::function<void()>& body) {
  body();
  g.synchronize();
  std::vector<double> times;
  auto start = g.newEvent(), end = g.newEvent();
  for (int i = 0; i < reps; ++i) {
    start.record(g.stream());
    body();
    end.record(g.stream());
    end.synchronize();
    times.push_back(end.millisecondsSince(start));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}
