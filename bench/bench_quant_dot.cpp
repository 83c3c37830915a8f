// The int8 x 4-bit kernels (llm::QuantizedMatrix: the activations to int8 codes, then the
// panels' integer kernels, what Linear runs) beside the path they replaced: the same
// group-quantized rows dequantized to f32, 16 rows at a time, then multiplied in f32 (dot
// products for one activation row, sgemm for more). Qwen3-0.6B's MLP
// shapes, decode (1 row) and a prefill block (64 rows); same threads (GIZML_THREADS), best of
// alternating runs; prints ms per call of each and the ratio (anchor time / ours: > 1 is faster).
#include <gizml/gemm.h>
#include <gizml/group_quant.h>
#include <gizml/threads.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <utility>
#include <vector>

namespace {

double seconds(const std::function<void()>& run) {
  const auto t0 = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::pair<double, double> bestSeconds(const std::function<void()>& ours, const std::function<void()>& theirs) {
  ours();
  theirs();
  double bestOurs = 1e30, bestTheirs = 1e30, total = 0;
  for (int i = 0; i < 3 || total < 1.0; ++i) {
    const double s = seconds(ours), t = seconds(theirs);
    bestOurs = std::min(bestOurs, s);
    bestTheirs = std::min(bestTheirs, t);
    total += s + t;
  }
  return {bestOurs, bestTheirs};
}

void run(int64_t out, int64_t in, int64_t rows) {
  const gizml::llm::GroupFormat f{4, 32};
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(out * in)), x(static_cast<size_t>(rows * in));
  for (float& v : w) v = dist(rng);
  for (float& v : x) v = dist(rng);
  const int64_t rowBytes = gizml::llm::groupRowBytes(f, in);
  std::vector<uint8_t> q(static_cast<size_t>(out * rowBytes));
  const float base = gizml::llm::quantizeGroups(f, w.data(), out, in, q.data());
  std::vector<float> y(static_cast<size_t>(rows * out));
  const gizml::llm::QuantizedMatrix matrix(f, base, q.data(), out, in);

  const auto ours = [&] { matrix.matmul(x.data(), rows, y.data()); };
  const auto dequantized = [&] {
    constexpr int64_t kBlock = 16;
    gizml::core::parallelFor((out + kBlock - 1) / kBlock, 1, [&](int64_t b0, int64_t b1) {
      std::vector<float> buf(static_cast<size_t>(kBlock * in));
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t first = b * kBlock, n = std::min(kBlock, out - first);
        gizml::llm::dequantizeGroups(f, base, q.data() + first * rowBytes, n, in, buf.data());
        if (rows == 1) {
          for (int64_t o = 0; o < n; ++o) {
            // Eight sums, as the old Linear did, so that the compiler vectorises the loop.
            float acc[8] = {};
            for (int64_t i = 0; i + 8 <= in; i += 8)
              for (int l = 0; l < 8; ++l) acc[l] += buf[static_cast<size_t>(o * in + i + l)] * x[static_cast<size_t>(i + l)];
            float s = 0;
            for (float v : acc) s += v;
            y[static_cast<size_t>(first + o)] = s;
          }
        } else {
          gizml::cpu::sgemm(rows, n, in, x.data(), in, 1, buf.data(), 1, in, y.data() + first, out, false);
        }
      }
    });
  };
  const auto [s, t] = bestSeconds(ours, dequantized);
  std::printf("%5lld x %5lld, %3lld rows: int8 kernels %8.3f ms (%5.1f GMAC/s), dequantize + f32 %8.3f ms, ratio %.2f\n",
              static_cast<long long>(out), static_cast<long long>(in), static_cast<long long>(rows), s * 1e3,
              static_cast<double>(out * in * rows) / s * 1e-9, t * 1e3, t / s);
}

}  // namespace

int main() {
  std::printf("threads %d, 4-bit weights in groups of 32\n", gizml::core::threadCount());
  for (int64_t rows : {1, 64, 512}) {
    run(3072, 1024, rows);  // gate/up
    run(1024, 3072, rows);  // down
  }
  return 0;
}
