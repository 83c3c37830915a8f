#pragma once
// What MiniMax H3's two decoders share: the sampler's latents back in the VAE's range,
// latents * std + mean of their channel (axis 1), as the pipeline does before either decode.
#include <gizml/error.h>
#include <gizml/tensor.h>

#include <string>
#include <vector>

namespace gizml::diffusion {

/// latents [n, c, ...] (any float dtype, on the host) times std[ch] plus mean[ch]: F32.
inline T::Tensor h3Denormalized(const T::Tensor& latents, const std::vector<float>& mean,
                                const std::vector<float>& std) {
  T::Shape shape(static_cast<size_t>(latents.ndim()), 1);
  shape[1] = latents.size(1);
  const auto column = [&](const std::vector<float>& v) {
    return T::tensor(shape, std::vector<double>(v.begin(), v.end()));
  };
  return (T::lazy(latents.host().cast(DType::F32)) * T::lazy(column(std)) + T::lazy(column(mean))).eval();
}

}  // namespace gizml::diffusion
