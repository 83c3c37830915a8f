// netops on the CPU against the unfused tensor operations that compute the same (the anchor, same
// run, same threads): attention vs q kᵀ, softmax, times v (which stores the scores); cross-entropy
// rows vs logSoftmax and a gather. Prints milliseconds and the ratio anchor / ours (> 1: faster).
#include <gizml/netops.h>
#include <gizml/threads.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

using namespace gizml;

namespace {

double bestSeconds(const std::function<void()>& f, int runs = 5) {
  f();  // warm-up
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

void report(const char* name, double ours, const char* anchorName, double anchor) {
  std::printf("%-40s %9.2f ms   %-28s %9.2f ms   ratio %.2f\n", name, ours * 1e3, anchorName, anchor * 1e3,
              anchor / ours);
}

}  // namespace

int main() {
  std::printf("gizml netops bench, %d threads\n", core::threadCount());
  for (const bool causal : {false, true}) {
    const int64_t b = 8, t = 512, d = 64;
    const T::Tensor q = T::uniform(T::Key(1), {b, t, d}, -1, 1), k = T::uniform(T::Key(2), {b, t, d}, -1, 1),
                    v = T::uniform(T::Key(3), {b, t, d}, -1, 1);
    const double scale = 0.125;
    const double ours = bestSeconds([&] { volatile auto o = netops::attention(q, k, v, scale, causal); (void)o; });
    const T::Tensor mask = netops::causalMask(t, t);
    const double anchor = bestSeconds([&] {
      T::Tensor scores = q.matmul(k.transpose(1, 2)).mul(T::scalar(scale));
      if (causal) scores = scores.add(mask);
      volatile auto o = scores.softmax(-1).matmul(v);
      (void)o;
    });
    report(causal ? "attention causal [8, 512, 64]" : "attention [8, 512, 64]", ours, "matmul+softmax+matmul", anchor);
  }
  {
    const int64_t rows = 256, classes = 32000;
    const T::Tensor logits = T::uniform(T::Key(4), {rows, classes}, -8, 8);
    std::vector<int64_t> labels;
    for (int64_t r = 0; r < rows; ++r) labels.push_back((r * 7919) % classes);
    const T::Tensor idx = T::tensor({rows, 1}, std::vector<double>(labels.begin(), labels.end()), DType::I64);
    const double ours = bestSeconds([&] { volatile auto l = netops::crossEntropyRows(logits, labels); (void)l; });
    const double anchor = bestSeconds([&] { volatile auto l = T::gather(logits.logSoftmax(1), 1, idx).neg(); (void)l; });
    report("crossEntropyRows [256, 32000]", ours, "logSoftmax+gather", anchor);
  }
  return 0;
}
