#pragma once
// The blocks of BFL's VAE (black-forest-labs flux, src/flux/modules/autoencoder.py), shared by
// FLUX.1's decoder and FLUX.2's encoder and decoder: ResNet blocks, single-head attention over the
// pixels, GroupNorm(32, eps 1e-6) + swish, the 3 x 3 convolutions through netops::lazyConv (bias
// and residual fused into the product's store). F32, one image [c, h, w] at a time, on the host
// or on the GPU the tensors were moved to. Weights read by BFL's names (weight_file.h), or by
// diffusers' where the file has them.
#include <gizml/tensor.h>

#include <optional>
#include <string>
#include <vector>

#include "weight_file.h"

namespace gizml::diffusion::vae {

struct Norm {
  T::Tensor w, b;  // [c]
};

struct Conv {
  T::Tensor w;  // [o, c k k]
  T::Tensor b;  // [o, 1]
  int64_t k = 0;
};

struct ResBlock {
  Norm norm1, norm2;
  Conv conv1, conv2;
  std::optional<Conv> shortcut;  // nin_shortcut, where the block changes the channel count
};

struct Attention {
  Norm norm;
  T::Tensor q, k, v, proj;      // [c, c] (x Wᵀ)
  T::Tensor qb, kb, vb, projb;  // [c]
};

// conv_in, mid (block, attention, block), the up levels (level 0, the image's resolution, first;
// ResNet blocks, then nearest x2 and a 3 x 3 conv but for level 0), norm_out + swish, conv_out.
struct Decoder {
  struct Level {
    std::vector<ResBlock> blocks;
    std::optional<Conv> upsample;
  };
  Conv convIn;
  ResBlock mid1, mid2;
  Attention attn;
  std::vector<Level> levels;
  Norm normOut;
  Conv convOut;
};

// conv_in, the down levels (level 0 first; ResNet blocks, then zeros padded right and below and a
// 3 x 3 conv of stride 2 but for the last level), mid, norm_out + swish, conv_out (2 z channels:
// the posterior's mean and log variance).
struct Encoder {
  struct Level {
    std::vector<ResBlock> blocks;
    std::optional<Conv> downsample;
  };
  Conv convIn;
  std::vector<Level> levels;
  ResBlock mid1, mid2;
  Attention attn;
  Norm normOut;
  Conv convOut;
};

// A VAE file's tensors grouped as the blocks' parts, their sizes from their shapes. Names are
// BFL's; a file in diffusers' names (decoder.up_blocks.0...) is read through the same names.
class Reader : public WeightFile {
 public:
  Reader(const std::string& path, const std::string& prefix, const std::string& model);

  Norm norm(const std::string& name, int64_t c);
  Conv conv(const std::string& name, int64_t c, int64_t o, int64_t k);
  // A 1 x 1 convolution as the linear [o, c] (some files store it so).
  T::Tensor linear(const std::string& name, int64_t c);
  ResBlock resBlock(const std::string& name, int64_t c, int64_t o);
  Attention attention(const std::string& name, int64_t c);
  // The channel count a layer makes: dimension 0 of its weight.
  int64_t outputs(const std::string& name) const;
  // The channel count a layer reads: dimension 1 of its weight [o, c, k, k].
  int64_t inputs(const std::string& name) const;

  // The decoder or encoder under base ("decoder." or "" where the prefix says it).
  Decoder decoder(const std::string& base);
  Encoder encoder(const std::string& base);
};

// The convolution of x [c, h, w] (pad k / 2), plus residual [o, h, w] when given: [o, h, w].
T::Tensor conv(const Conv& c, const T::Tensor& x, const T::Tensor* residual = nullptr);

// z [latent, h, w] to pixels [out, 2^(levels - 1) h, ...].
T::Tensor decode(const Decoder& d, const T::Tensor& z);
// pixels [in, h, w] (h, w multiples of 2^(levels - 1)) to [2 latent, h / 2^(levels - 1), ...].
T::Tensor encode(const Encoder& e, const T::Tensor& x);

// The parts with their tensors copied to g.
Conv moved(const Conv& c, const gizhw::gpu::Gpu& g);
Decoder moved(const Decoder& d, const gizhw::gpu::Gpu& g);
Encoder moved(const Encoder& e, const gizhw::gpu::Gpu& g);

}  // namespace gizml::diffusion::vae
