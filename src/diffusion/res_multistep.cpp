// ComfyUI's res_multistep with eta 0 (comfy/k_diffusion/sampling.py, `res_multistep` as
// `sample_res_multistep` calls it), a second-order exponential multistep method
// (arXiv 2308.02157). ComfyUI computes its scalars as 0-d float32 tensors and every tensor
// operation rounds to float32; so do we, in its order (the file compiles with
// -ffp-contract=off, CMakeLists.txt, so that no scalar multiply-add fuses).
#include <gizml/diffusion.h>

#include <cmath>
#include <limits>
#include <string>

namespace gizml::diffusion {
namespace {

// torch.nan_to_num(v, nan=0.0): NaN to 0, infinities to the largest finite floats.
float nanToNum(float v) {
  if (std::isnan(v)) return 0.0f;
  if (std::isinf(v)) return v > 0 ? std::numeric_limits<float>::max() : std::numeric_limits<float>::lowest();
  return v;
}

// A 0-d F32 tensor of v on like's device.
tensor::Tensor scalarLike(float v, const tensor::Tensor& like) {
  tensor::Tensor s = tensor::scalar(v, DType::F32);
  return like.onGpu() ? s.on(gizhw::gpu::Gpu(like.storage()->gpu())) : s;
}

}  // namespace

ResMultistep::ResMultistep(std::vector<float> sigmas) : sigmas_(std::move(sigmas)) {
  if (sigmas_.size() < 2)
    throw Error("ResMultistep: needs at least two sigmas, got " + std::to_string(sigmas_.size()));
  for (size_t i = 0; i < sigmas_.size(); ++i) {
    const float s = sigmas_[i];
    const bool last = i + 1 == sigmas_.size();
    if (!std::isfinite(s) || s < 0.0f || (s == 0.0f && !last) || (i > 0 && !(s < sigmas_[i - 1])))
      throw Error("ResMultistep: sigmas must decrease and be positive but for a last 0; sigma " +
                  std::to_string(i) + " is " + std::to_string(s));
  }
}

tensor::Tensor ResMultistep::step(int64_t i, const tensor::Tensor& x, const tensor::Tensor& denoised) {
  if (i != next_)
    throw Error("ResMultistep::step: step " + std::to_string(i) + " given, step " + std::to_string(next_) +
                " expected (steps run in order from 0)");
  if (i >= steps()) throw Error("ResMultistep::step: step " + std::to_string(i) + " of " + std::to_string(steps()));
  if (x.dtype() != DType::F32 || denoised.dtype() != DType::F32)
    throw Error("ResMultistep::step: x and denoised must be F32");
  if (x.shape() != denoised.shape())
    throw Error("ResMultistep::step: x " + tensor::shapeText(x.shape()) + " and denoised " +
                tensor::shapeText(denoised.shape()) + " differ in shape");

  const size_t k = static_cast<size_t>(i);
  const float sigma = sigmas_[k], sigmaNext = sigmas_[k + 1];
  tensor::Tensor out;
  if (i == 0 || sigmaNext == 0.0f) {
    // Euler: x + (x - denoised) / sigma * (sigma_next - sigma).
    const tensor::Tensor d = x.sub(denoised).div(scalarLike(sigma, x));
    out = x.add(d.mul(scalarLike(sigmaNext - sigma, x)));
  } else {
    // With t = -log(sigma) and eta 0 (so sigma_down is the next sigma):
    // h = t_next - t, c2 = (t_prev - t) / h, phi1 = expm1(-h) / -h, phi2 = (phi1 - 1) / -h,
    // x = exp(-h) x + h (b1 denoised + b2 denoised_prev), b1 = phi1 - phi2 / c2, b2 = phi2 / c2.
    const float t = -std::log(sigma), tNext = -std::log(sigmaNext), tPrev = -std::log(sigmas_[k - 1]);
    const float h = tNext - t;
    const float c2 = (tPrev - t) / h;
    const float minusH = -h;
    const float phi1 = std::expm1(minusH) / minusH;
    const float phi2 = (phi1 - 1.0f) / minusH;
    const float b1 = nanToNum(phi1 - phi2 / c2);
    const float b2 = nanToNum(phi2 / c2);
    const tensor::Tensor mix = denoised.mul(scalarLike(b1, x)).add(previous_.mul(scalarLike(b2, x)));
    out = x.mul(scalarLike(std::exp(minusH), x)).add(mix.mul(scalarLike(h, x)));
  }
  previous_ = denoised;
  ++next_;
  return out;
}

}  // namespace gizml::diffusion
