#pragma once
// GPU timing the GPU benchmarks share: the median of `reps` runs of body between two events on
// the GPU's stream, after one warm-up run (compilation, module load, allocator).
#include <gizhw/gpu.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
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

/// The GPU a benchmark runs on, its description printed; none (and a line saying so) without one.
inline std::optional<gizhw::gpu::Gpu> benchmarkGpu(const char* program) {
  auto g = gizhw::gpu::open();
  if (!g) {
    std::printf("%s: no GPU found, nothing to measure\n", program);
    return g;
  }
  std::printf("device: %s, %d SMs, %.1f GiB\n", g->describe().c_str(), g->properties().multiprocessors,
              static_cast<double>(g->properties().memoryBytes) / (1 << 30));
  return g;
}

/// Whether the benchmark was asked for its small sizes (`--quick`: for the GPU emulator).
inline bool quickRun(int argc, char** argv) { return argc > 1 && std::string(argv[1]) == "--quick"; }
