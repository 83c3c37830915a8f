// Bandwidth of fused lazy chains and reductions over 64 M floats, against memcpy of the same
// bytes with the same threads (the anchor). Prints GB/s and the ratio ours / memcpy.
#include <gizml/tensor.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>

#include "core/thread_pool.h"
#include "cpu/elementwise.h"

using namespace gizml;

namespace {

double bestSeconds(const std::function<void()>& f, int runs = 7) {
  f();  // warm-up
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// memcpy split across the pool, as our kernels are.
void parallelCopy(void* dst, const void* src, size_t bytes) {
  core::parallelFor(static_cast<int64_t>(bytes), 1 << 20, [&](int64_t b, int64_t e) {
    std::memcpy(static_cast<char*>(dst) + b, static_cast<const char*>(src) + b, static_cast<size_t>(e - b));
  });
}

void report(const char* name, double bytes, double ours, double anchorBytes, double anchor) {
  const double oursGbs = bytes / ours / 1e9, anchorGbs = anchorBytes / anchor / 1e9;
  std::printf("%-44s %8.2f GB/s   memcpy %8.2f GB/s   ratio %.2f\n", name, oursGbs, anchorGbs, oursGbs / anchorGbs);
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
  const double memcpyTime = bestSeconds([&] { parallelCopy(copy.rawData(), x.rawData(), bytes); });

  // Eight elementwise operations, one pass.
  const auto chain = ((T::lazy(x) * 1.5 + 0.25).relu().sub(0.5).abs().mul(T::lazy(x)).max(T::Lazy(-0.1)) + 2.0).sqrt();
  const double into = bestSeconds([&] { chain.evalInto(out); });
  report("lazy chain of 8 ops (evalInto)", 2.0 * bytes, into, 2.0 * bytes, memcpyTime);
  const double fresh = bestSeconds([&] { volatile auto t = chain.eval(); (void)t; });
  report("lazy chain of 8 ops (eval, new result)", 2.0 * bytes, fresh, 2.0 * bytes, memcpyTime);

  // Reductions read n floats; memcpy's traffic is twice that, so compare against reading half.
  const double sumTime = bestSeconds([&] { volatile double s = x.sum().item(); (void)s; });
  report("sum of 64 M floats", static_cast<double>(bytes), sumTime, 2.0 * bytes, memcpyTime);
  const double maxTime = bestSeconds([&] { volatile double s = x.max().item(); (void)s; });
  report("max of 64 M floats", static_cast<double>(bytes), maxTime, 2.0 * bytes, memcpyTime);
  return 0;
}
