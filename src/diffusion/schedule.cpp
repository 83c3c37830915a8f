// ComfyUI's ModelSamplingAuraFlow (ModelSamplingDiscreteFlow with multiplier 1) and its `simple`
// scheduler (comfy/model_sampling.py, comfy/samplers.py), and its Flux2Scheduler
// (comfy_extras/nodes_flux.py), in the float32 torch computes them in.
#include <gizml/diffusion.h>

#include <cmath>
#include <string>

namespace gizml::diffusion {

std::vector<float> flowSigmas(int64_t steps, double shift) {
  constexpr int64_t kTimesteps = 1000;
  if (steps < 1 || steps > kTimesteps)
    throw Error("flowSigmas: steps must be 1.." + std::to_string(kTimesteps) + ", not " + std::to_string(steps));
  if (!(shift > 0.0)) throw Error("flowSigmas: shift must be positive, not " + std::to_string(shift));
  // sigmas[k - 1] = time_snr_shift(shift, t) with t = k / 1000 (torch.arange / 1000 in float32):
  // shift t / (1 + (shift - 1) t), each operation rounded to float32.
  const float a = static_cast<float>(shift), am1 = static_cast<float>(shift - 1.0);
  auto sigma = [&](int64_t k) {
    const float t = static_cast<float>(k) / static_cast<float>(kTimesteps);
    return (a * t) / (1.0f + am1 * t);
  };
  // simple: sigmas[-(1 + int(x * len / steps))] for x = 0..steps-1 (Python floats), then 0.
  const double stride = static_cast<double>(kTimesteps) / static_cast<double>(steps);
  std::vector<float> out;
  out.reserve(static_cast<size_t>(steps) + 1);
  for (int64_t x = 0; x < steps; ++x) {
    const int64_t back = static_cast<int64_t>(static_cast<double>(x) * stride);
    out.push_back(sigma(kTimesteps - back));
  }
  out.push_back(0.0f);
  return out;
}

double flux2Mu(int64_t imageTokens, int64_t steps) {
  const double a1 = 8.73809524e-05, b1 = 1.89833333, a2 = 0.00016927, b2 = 0.45666666;
  const double n = static_cast<double>(imageTokens);
  if (imageTokens > 4300) return a2 * n + b2;
  const double m200 = a2 * n + b2, m10 = a1 * n + b1;
  const double a = (m200 - m10) / 190.0, b = m200 - 200.0 * a;
  return a * static_cast<double>(steps) + b;
}

std::vector<float> flux2Sigmas(int64_t steps, int64_t imageTokens) {
  constexpr int64_t kMaxSteps = 4096;  // the node's limit
  if (steps < 1 || steps > kMaxSteps)
    throw Error("flux2Sigmas: steps must be 1.." + std::to_string(kMaxSteps) + ", not " + std::to_string(steps));
  if (imageTokens < 1) throw Error("flux2Sigmas: imageTokens must be positive, not " + std::to_string(imageTokens));
  const float e = static_cast<float>(std::exp(flux2Mu(imageTokens, steps)));
  // torch.linspace(1, 0, n) in float32 (its scalar formula: from the start up to halfway, from the
  // end after; its vectorised loop can differ by an ulp for some n).
  const int64_t n = steps + 1, halfway = n / 2;
  const float step = (0.0f - 1.0f) / static_cast<float>(n - 1);
  std::vector<float> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float t = i < halfway ? 1.0f + step * static_cast<float>(i) : 0.0f - step * static_cast<float>(n - i - 1);
    // e / (e + (1 / t - 1)): torch's scalar / tensor is reciprocal(tensor) * scalar; t = 0 gives 0.
    const float inner = 1.0f / t - 1.0f;
    out.push_back(1.0f / (e + inner) * e);
  }
  return out;
}

}  // namespace gizml::diffusion
