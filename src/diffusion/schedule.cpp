// ComfyUI's ModelSamplingAuraFlow (ModelSamplingDiscreteFlow with multiplier 1) and its `simple`
// scheduler (comfy/model_sampling.py, comfy/samplers.py), in the float32 torch computes them in.
#include <gizml/diffusion.h>

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

}  // namespace gizml::diffusion
