// The thread pool's round trip (core::parallelTasks: hand one task to each thread, wait for all)
// beside OpenMP's (`#pragma omp parallel for`, libgomp, what llama.cpp's CPU backend uses), the
// cost a decode step pays about 150 times. Each job is one small task per thread (a sum of 2,048
// floats), with a gap of serial work on the calling thread between jobs as in decode (a norm, the
// activations' int8 codes): [SECONDS] per case (default 1). Prints microseconds per job, best of
// alternating runs, wall time and the process's CPU time (what the spinning costs the machine).
// Run with OMP_WAIT_POLICY=PASSIVE for the anchor llama.cpp is compared at (docs/benchmarks.md).
#include <gizml/threads.h>
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "best_of_alternating.h"

namespace {

constexpr int kJobs = 2000;
constexpr int kTaskFloats = 2048;

float sumOf(const float* v, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += v[i];
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const double budget = argc > 1 ? std::atof(argv[1]) : 1.0;
  const int threads = gizml::core::threadCount();
  omp_set_num_threads(threads);
  std::vector<float> data(static_cast<size_t>(threads * kTaskFloats), 1.0f), serial(8192, 0.5f);
  std::vector<float> out(static_cast<size_t>(threads) * 16);  // a line apart
  volatile float sink = 0;
  std::printf("thread pool round trip, %d threads, %d jobs a run, us per job (ours / OpenMP, ratio = OpenMP / ours)\n",
              threads, kJobs);
  for (int gap : {0, 1024, 8192}) {
    const auto job = [&](int t) { out[static_cast<size_t>(t) * 16] = sumOf(data.data() + t * kTaskFloats, kTaskFloats); };
    const auto ours = [&] {
      for (int j = 0; j < kJobs; ++j) {
        sink = sink + sumOf(serial.data(), gap);
        gizml::core::parallelTasks(threads, [&](int64_t t) { job(static_cast<int>(t)); });
      }
    };
    const auto openmp = [&] {
      for (int j = 0; j < kJobs; ++j) {
        sink = sink + sumOf(serial.data(), gap);
#pragma omp parallel for schedule(static, 1)
        for (int t = 0; t < threads; ++t) job(t);
      }
    };
    const auto [wallOurs, wallOpenmp] = bestSeconds(ours, openmp, 5, budget);
    const auto [cpuOurs, cpuOpenmp] = bestSeconds(ours, openmp, 5, budget, cpuClock);
    const double us = 1e6 / kJobs;
    std::printf("serial gap of %5d floats: wall %.2f / %.2f us (%.2f), cpu %.2f / %.2f us (%.2f)\n", gap,
                wallOurs * us, wallOpenmp * us, wallOpenmp / wallOurs, cpuOurs * us, cpuOpenmp * us, cpuOpenmp / cpuOurs);
  }
  return 0;
}
