// ComfyUI's `euler` sampler step (comfy/k_diffusion/sampling.py sample_euler without churn):
// each tensor operation rounds to float32, in ComfyUI's order.
#include <gizml/diffusion.h>

#include <cmath>
#include <string>

namespace gizml::diffusion {

tensor::Tensor eulerStep(const tensor::Tensor& x, const tensor::Tensor& denoised, float sigma, float sigmaNext) {
  if (x.shape() != denoised.shape() || x.dtype() != DType::F32 || denoised.dtype() != DType::F32)
    throw Error("eulerStep: x " + tensor::shapeText(x.shape()) + " and denoised " +
                tensor::shapeText(denoised.shape()) + " must be F32 of one shape");
  if (!(sigma > 0.0f) || !std::isfinite(sigma) || !std::isfinite(sigmaNext))
    throw Error("eulerStep: sigma " + std::to_string(sigma) + " must be positive and finite");
  // d = (x - denoised) / sigma; x + d (sigmaNext - sigma).
  using tensor::lazy;
  const tensor::Tensor diff = (lazy(x) - lazy(denoised)).eval();
  const tensor::Tensor d = (lazy(diff) / tensor::Lazy(sigma)).eval();
  const float dt = sigmaNext - sigma;
  const tensor::Tensor step = (lazy(d) * tensor::Lazy(dt)).eval();
  return (lazy(x) + lazy(step)).eval();
}

}  // namespace gizml::diffusion
