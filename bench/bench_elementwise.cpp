// Bandwidth of fused lazy chains and reductions over 64 M floats, against memcpy of the same
// bytes with the same threads (the anchor). Prints GB/s and the ratio ours / memcpy, by wall
// time and by CPU time (all threads, kernel included): when other programs share the cores,
// wall time measures the share each run got, CPU time what it needed.
#include <gizml/cpu.h>
#include <gizml/tensor.h>
#include <gizml/threads.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <functional>

using namespace gizml;

namespace {

struct Seconds {
  double wall = 1e30, cpu = 1e30;
};

double processCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Keeps the best wall and CPU times of f.
void timeRun(const std::function<void()>& f, Seconds& best) {
  const double cpu0 = processCpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  best.wall = std::min(best.wall, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  best.cpu = std::min(best.cpu, processCpuSeconds() - cpu0);
}

// The best times of ours and of the anchor, run in turns so that both meet the same load from
// whatever else runs on the machine.
struct Best {
  Seconds ours, anchor;
};
Best bestInTurns(const std::function<void()>& ours, const std::function<void()>& anchor, int runs = 15) {
  ours();  // warm-up
  anchor();
  Best best;
  for (int i = 0; i < runs; ++i) {
    timeRun(anchor, best.anchor);
    timeRun(ours, best.ours);
  }
  return best;
}

// memcpy split across the pool, as our kernels are.
void parallelCopy(void* dst, const void* src, size_t bytes) {
  core::parallelFor(static_cast<int64_t>(bytes), 1 << 20, [&](int64_t b, int64_t e) {
    std::memcpy(static_cast<char*>(dst) + b, static_cast<const char*>(src) + b, static_cast<size_t>(e - b));
  });
}

void report(const char* name, double bytes, double anchorBytes, const Best& best) {
  const double oursGbs = bytes / best.ours.wall / 1e9, anchorGbs = anchorBytes / best.anchor.wall / 1e9;
  const double cpuRatio = (bytes / best.ours.cpu) / (anchorBytes / best.anchor.cpu);
  std::printf("%-40s %7.2f GB/s   memcpy %7.2f GB/s   ratio %.2f   by CPU time %.2f\n", name, oursGbs, anchorGbs,
              oursGbs / anchorGbs, cpuRatio);
}

}  // namespace

int main() {
  const int64_t n = int64_t{64} << 20;
  const size_t bytes = static_cast<size_t>(n) * 4;
  std::printf("gizml elementwise bench: %lld floats, %d threads, SIMD %s\n", static_cast<long long>(n),
              core::threadCount(), cpu::simdTarget());
  const T::Tensor x = T::uniform(T::Key(7), {n}, -1, 1);
  T::Tensor out = T::empty({n});
  T::Tensor copy = T::empty({n});
  parallelCopy(copy.rawData(), x.rawData(), bytes);  // touch the pages

  // memcpy reads n floats and writes n floats: the same traffic as a one-input chain.
  const auto memcpyAll = [&] { parallelCopy(copy.rawData(), x.rawData(), bytes); };

  // Eight elementwise operations, one pass.
  const auto chain = ((T::lazy(x) * 1.5 + 0.25).relu().sub(0.5).abs().mul(T::lazy(x)).max(T::Lazy(-0.1)) + 2.0).sqrt();
  const Best into = bestInTurns([&] { chain.evalInto(out); }, memcpyAll);
  report("lazy chain of 8 ops (evalInto)", 2.0 * bytes, 2.0 * bytes, into);
  const Best fresh = bestInTurns([&] { volatile auto t = chain.eval(); (void)t; }, memcpyAll);
  report("lazy chain of 8 ops (eval, new result)", 2.0 * bytes, 2.0 * bytes, fresh);

  // Reductions read n floats; memcpy's traffic is twice that, so compare against reading half.
  const Best sum = bestInTurns([&] { volatile double s = x.sum().item(); (void)s; }, memcpyAll);
  report("sum of 64 M floats", static_cast<double>(bytes), 2.0 * bytes, sum);
  const Best max = bestInTurns([&] { volatile double s = x.max().item(); (void)s; }, memcpyAll);
  report("max of 64 M floats", static_cast<double>(bytes), 2.0 * bytes, max);
  return 0;
}
