// What a second thread can give on this machine, whatever our kernels do: the same work on 1
// and on N threads (N = the hardware's, or argv[1]), and the speed-up N threads give over one.
//   fma, port-bound: 10 independent chains of 256-bit FMAs, as many as the FMA units can take a
//     cycle; where two vCPUs are two threads of one physical core (SMT), they share those units
//     and N threads give about 1x.
//   fma, latency-bound: one chain, a new FMA only when the last is done; SMT threads fill each
//     other's idle cycles, so this scales on siblings and on separate cores alike.
//   read: the sum of 256 MiB, split in parts, bound by memory.
// `bench_core_scaling read [N]` runs the read alone (bench/bench_llm.py runs it between its rounds:
// this VM's bandwidth moves between about 48 and 75 GB/s for two threads from hour to hour).
// The anchor is the ideal, N x; issue 18 asks prefill at 2 threads for 1.8x of one thread.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr long kSteps = 200'000'000;

__attribute__((target("avx2,fma"))) float fmaPortBound(long steps) {
  __m256 a0 = _mm256_set1_ps(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0;
  const __m256 m = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-4f);
  for (long k = 0; k < steps; ++k) {
    a0 = _mm256_fmadd_ps(a0, m, c), a1 = _mm256_fmadd_ps(a1, m, c), a2 = _mm256_fmadd_ps(a2, m, c);
    a3 = _mm256_fmadd_ps(a3, m, c), a4 = _mm256_fmadd_ps(a4, m, c), a5 = _mm256_fmadd_ps(a5, m, c);
    a6 = _mm256_fmadd_ps(a6, m, c), a7 = _mm256_fmadd_ps(a7, m, c), a8 = _mm256_fmadd_ps(a8, m, c);
    a9 = _mm256_fmadd_ps(a9, m, c);
    // Keeps the ten chains in registers and in this loop (no spill, no hoisting).
    __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9));
  }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                 _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)), _mm256_add_ps(a8, a9)));
  return _mm256_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) float fmaLatencyBound(long steps) {
  __m256 a = _mm256_set1_ps(1);
  const __m256 m = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-4f);
  for (long k = 0; k < steps; ++k) {
    a = _mm256_fmadd_ps(a, m, c);
    __asm__ volatile("" : "+x"(a));
  }
  return _mm256_cvtss_f32(a);
}

// Seconds for `threads` threads each to run work(part, parts) once, best of three.
double secondsOf(int threads, const std::function<void(int, int)>& work) {
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(work, t, threads);
    for (auto& t : pool) t.join();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::printf("bench_core_scaling: needs AVX2 and FMA\n");
    return 0;
  }
  const bool readOnly = argc > 1 && std::string(argv[1]) == "read";
  const int arg = readOnly ? 2 : 1;
  const int n = argc > arg ? std::atoi(argv[arg]) : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<float> data(size_t{64} << 20, 1.0f);  // 256 MiB
  volatile float sink = 0;
  std::printf("the same work per thread on 1 and %d threads: work per second, and %d threads' over one's\n", n, n);
  const auto report = [&](const char* name, double units, const std::function<void(int, int)>& perThread,
                          bool splitsWork) {
    const double one = secondsOf(1, perThread), many = secondsOf(n, perThread);
    // Work that each thread repeats (the FMAs) grows with the threads; split work stays the same.
    const double speedup = splitsWork ? one / many : n * one / many;
    std::printf("%-20s 1 thread %8.2f, %d threads %8.2f %s, speed-up %.2f (ideal %d)\n", name, units / one, n,
                (splitsWork ? units : n * units) / many, splitsWork ? "GB/s" : "G FMA/s", speedup, n);
  };
  if (!readOnly) {
    report("fma, port-bound", 10.0 * kSteps / 1e9, [&](int, int) { sink = sink + fmaPortBound(kSteps); }, false);
    report("fma, latency-bound", kSteps / 1e9, [&](int, int) { sink = sink + fmaLatencyBound(kSteps); }, false);
  }
  report("read 256 MiB", static_cast<double>(data.size() * sizeof(float)) / 1e9, [&](int part, int parts) {
    const size_t begin = data.size() * part / parts, end = data.size() * (part + 1) / parts;
    float s = 0;
    for (size_t i = begin; i < end; i += 16) s += data[i];  // one float a cache line: bound by memory
    sink = sink + s;
  }, true);
  return 0;
}
