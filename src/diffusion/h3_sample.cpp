// MiniMax H3's schedule and sampling: MiniMaxH3Scheduler's shifted sigmas for video and audio, the
// AdaLN tables of every pass made once by prepare, and its Euler steps (eta 0) in float32.
#include <gizml/diffusion.h>
#include <gizml/error.h>

#include <algorithm>
#include <string>
#include <vector>

#include "h3_model.h"

namespace gizml::diffusion {

namespace {

// torch.linspace(1, 0, points) in float32 (ATen's kernel: from the start below halfway, from the
// end after), pushed through the exponential shift s sigma / (1 + (s - 1) sigma), consecutive
// duplicates dropped (unique_consecutive).
std::vector<float> shiftedSigmas(int64_t points, double shift) {
  const float step = (0.0f - 1.0f) / static_cast<float>(points - 1), s = static_cast<float>(shift),
              s1 = static_cast<float>(shift - 1.0);
  std::vector<float> sigmas;
  for (int64_t i = 0; i < points; ++i) {
    const float base = i < points / 2 ? 1.0f + step * static_cast<float>(i)
                                      : 0.0f - step * static_cast<float>(points - i - 1);
    const float sigma = s * base / (1.0f + s1 * base);
    if (sigmas.empty() || sigmas.back() != sigma) sigmas.push_back(sigma);
  }
  return sigmas;
}

// MiniMaxH3Scheduler.step: x0 = x + (1 - t) v (the velocity is data-ward), then the blend
// r x + (1 - r) x0 with r = sigma_next / sigma.
T::Tensor eulerStep(const T::Tensor& x, const T::Tensor& v, float t, float sigma, float sigmaNext) {
  const float ratio = sigmaNext / sigma;
  const T::Tensor x0 = (T::lazy(x) + T::Lazy(1.0f - t) * T::lazy(v)).eval();
  return (T::Lazy(ratio) * T::lazy(x) + T::Lazy(1.0f - ratio) * T::lazy(x0)).eval();
}

}  // namespace

int64_t H3Model::prepare(int64_t steps, H3Shift shift) {
  if (steps < 1) throw Error("H3Model::prepare: steps " + std::to_string(steps) + " is not at least 1");
  if (!(shift.video > 0) || !(shift.audio > 0))
    throw Error("H3Model::prepare: shifts " + std::to_string(shift.video) + ", " + std::to_string(shift.audio) +
                " are not positive");
  auto t = std::make_shared<Tables>();
  t->videoSigmas = shiftedSigmas(steps + 1, shift.video);
  t->audioSigmas = shiftedSigmas(steps + 1, shift.audio);
  if (t->videoSigmas.size() != t->audioSigmas.size())
    throw Error("H3Model::prepare: the shifts " + std::to_string(shift.video) + " and " + std::to_string(shift.audio) +
                " give schedules of different lengths");
  for (size_t i = 0; i + 1 < t->videoSigmas.size(); ++i) {
    const float tv = 1.0f - t->videoSigmas[i], ta = 1.0f - t->audioSigmas[i];
    t->steps.push_back(h3::modulations(*weights_, {tv, ta, std::max(static_cast<double>(tv), h3::kKeyframeT)}));
    t->bytes += t->steps.back().bytes();
  }
  tables_ = std::move(t);
  return tables_->bytes;
}

H3Latents H3Model::sample(const H3Latents& noise, const H3Condition& condition,
                          const std::function<void(int64_t, const H3Latents&)>& onStep) const {
  if (!tables_) throw Error("H3Model::sample: no schedule prepared (call prepare first)");
  const Tables& s = *tables_;
  H3Latents x{h3::placed(*weights_, noise.video).cast(DType::F32).contiguous(),
              h3::placed(*weights_, noise.audio).cast(DType::F32).contiguous()};
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const H3Latents v = h3::pass(*weights_, x, condition, s.steps[i]);
    const float sv = s.videoSigmas[i], sa = s.audioSigmas[i];
    x = {eulerStep(x.video, v.video, 1.0f - sv, sv, s.videoSigmas[i + 1]),
         eulerStep(x.audio, v.audio, 1.0f - sa, sa, s.audioSigmas[i + 1])};
    if (onStep) onStep(static_cast<int64_t>(i), x);
  }
  return x;
}

const std::vector<float>& H3Model::videoSigmas() const {
  static const std::vector<float> none;
  return tables_ ? tables_->videoSigmas : none;
}

const std::vector<float>& H3Model::audioSigmas() const {
  static const std::vector<float> none;
  return tables_ ? tables_->audioSigmas : none;
}

int64_t H3Model::tableBytes() const { return tables_ ? tables_->bytes : 0; }

}  // namespace gizml::diffusion
