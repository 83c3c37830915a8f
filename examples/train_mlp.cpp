// Trains a 2-layer MLP with Adam on a synthetic 3-class task (three noisy spiral arms), twice
// from the same Key, and shows the runs agree to the bit; where a GPU is found, trains once more
// there and compares its loss curve with the CPU's.
#include <gizhw/gpu.h>
#include <gizml/grad.h>

#include <algorithm>

#include <cmath>
#include <cstdio>
#include <vector>

using namespace gizml;

namespace {

struct Data {
  T::Tensor x, labels;
};

// 3 spiral arms of `perArm` points each, with Gaussian noise from the key.
Data spirals(int64_t perArm, const T::Key& key) {
  const std::vector<float> noise = T::normal(key, {3 * perArm, 2}, 0.0, 0.04).toFloats();
  std::vector<double> xs, ys;
  for (int64_t arm = 0; arm < 3; ++arm)
    for (int64_t i = 0; i < perArm; ++i) {
      const double r = static_cast<double>(i) / static_cast<double>(perArm);
      const double angle = 4.0 * r + 2.0 * M_PI * static_cast<double>(arm) / 3.0;
      const size_t k = static_cast<size_t>(arm * perArm + i) * 2;
      xs.push_back(r * std::cos(angle) + noise[k]);
      xs.push_back(r * std::sin(angle) + noise[k + 1]);
      ys.push_back(static_cast<double>(arm));
    }
  return {T::tensor({3 * perArm, 2}, xs), T::tensor({3 * perArm}, ys, DType::I64)};
}

struct Result {
  std::vector<float> weights;
  std::vector<double> losses;  // at every step
  double accuracy = 0, loss = 0;
};

// Trains where `gpu` is (the host when it is empty).
Result train(const Data& hostData, int steps, bool print, const std::optional<gizhw::gpu::Gpu>& gpu = {}) {
  auto place = [&](const T::Tensor& t) { return gpu ? t.on(*gpu) : t; };
  const Data data{place(hostData.x), hostData.labels};
  const int64_t hidden = 64;
  const T::Key key(2024);
  std::vector<T::Tensor> params = {
      place(T::normal(key.split(1), {2, hidden}, 0.0, 1.0)), place(T::zeros({hidden})),
      place(T::normal(key.split(2), {hidden, 3}, 0.0, 1.0 / std::sqrt(static_cast<double>(hidden)))),
      place(T::zeros({3}))};
  grad::Adam adam(0.02);
  Result result;
  for (int step = 0; step <= steps; ++step) {
    grad::Graph g;
    std::vector<grad::Value> p;
    for (const auto& t : params) p.push_back(g.input(t));
    const auto h = g.relu(g.add(g.matmul(g.constant(data.x), p[0]), p[1]));
    const auto logits = g.add(g.matmul(h, p[2]), p[3]);
    const auto loss = g.crossEntropy(logits, data.labels);
    result.loss = g.value(loss).item();
    result.losses.push_back(result.loss);
    if (step == steps) {
      const auto predicted = g.value(logits).argmax(1).toInts();
      const auto labels = data.labels.toInts();
      int64_t right = 0;
      for (size_t i = 0; i < labels.size(); ++i) right += predicted[i] == labels[i];
      result.accuracy = static_cast<double>(right) / static_cast<double>(labels.size());
      break;
    }
    if (print && step % 100 == 0) std::printf("step %d: loss %.4f\n", step, result.loss);
    const auto grads = g.backward(loss);
    std::vector<T::Tensor> gs;
    for (const auto& v : p) gs.push_back(grads.of(v));
    adam.step(params, gs);
  }
  for (const auto& t : params)
    for (float v : t.toFloats()) result.weights.push_back(v);
  return result;
}

}  // namespace

int main() {
  const Data data = spirals(200, T::Key(7));
  const Result first = train(data, 600, true);
  const Result second = train(data, 600, false);
  std::printf("final loss %.4f, accuracy %.3f\n", first.loss, first.accuracy);
  std::printf("same bits when run again: %s\n", first.weights == second.weights ? "yes" : "no");
  bool gpuAgrees = true;
  if (const auto gpu = gizhw::gpu::open()) {
    // The GPU adds in the CPU's orders where it can, but its exp and matmul may round apart: the
    // curves agree within 1e-4 of the loss at every step, not to the bit.
    const Result onGpu = train(data, 600, false, gpu);
    double worst = 0;
    for (size_t i = 0; i < first.losses.size(); ++i)
      worst = std::max(worst, std::abs(onGpu.losses[i] - first.losses[i]) / std::max(1e-12, first.losses[i]));
    gpuAgrees = worst <= 1e-4 && onGpu.accuracy >= 0.95;
    std::printf("on %s: final loss %.4f, accuracy %.3f, largest relative loss difference %.2e\n",
                gpu->describe().c_str(), onGpu.loss, onGpu.accuracy, worst);
  }
  return first.accuracy >= 0.95 && first.weights == second.weights && gpuAgrees ? 0 : 1;
}
