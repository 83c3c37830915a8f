// FLUX.1's VAE decoder in BFL's layout (black-forest-labs flux, src/flux/modules/autoencoder.py):
// the weights read by name from ae.safetensors, their sizes from their shapes; the forward pass
// one image at a time in F32 with netops' GroupNorm, lazyConv (bias and residual fused into the
// product's store) and attention.
#include <gizml/diffusion.h>
#include <gizml/netops.h>

#include <cmath>
#include <optional>
#include <string>

#include "weight_file.h"

namespace gizml::diffusion {

namespace {

constexpr int64_t kGroups = 32;  // BFL's GroupNorm(num_groups=32)
constexpr double kEps = 1e-6;

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

struct Level {
  std::vector<ResBlock> blocks;
  std::optional<Conv> upsample;
};

// The decoder's tensors, taken by name (weight_file.h) and grouped as the decoder's parts.
class Reader : public WeightFile {
 public:
  explicit Reader(const std::string& path) : WeightFile(path, "decoder.", "a FLUX.1 VAE decoder") {}

  Norm norm(const std::string& name, int64_t c) {
    if (c % kGroups != 0) fail(name + ".weight", "has " + std::to_string(c) + " channels, which 32 groups do not divide");
    return {take(name + ".weight", {c}), take(name + ".bias", {c})};
  }

  Conv conv(const std::string& name, int64_t c, int64_t o, int64_t k) {
    return {take(name + ".weight", {o, c, k, k}).reshape({o, c * k * k}), take(name + ".bias", {o}).reshape({o, 1}),
            k};
  }

  // A 1 x 1 convolution as the linear [o, c] (some files store it so).
  T::Tensor linear(const std::string& name, int64_t c) {
    if (shapeOf(name).size() == 2) return take(name, {c, c});
    return take(name, {c, c, 1, 1}).reshape({c, c});
  }

  ResBlock resBlock(const std::string& name, int64_t c, int64_t o) {
    ResBlock r{norm(name + ".norm1", c), norm(name + ".norm2", o), conv(name + ".conv1", c, o, 3),
               conv(name + ".conv2", o, o, 3), std::nullopt};
    if (c != o || has(name + ".nin_shortcut.weight")) r.shortcut = conv(name + ".nin_shortcut", c, o, 1);
    return r;
  }

  // The channel count a layer makes: dimension 0 of its weight.
  int64_t outputs(const std::string& name) const {
    const T::Shape s = shapeOf(name);
    if (s.empty() || s[0] < 1) fail(name, "has shape " + T::shapeText(s) + ", expected [channels, ...]");
    return s[0];
  }
};

// The convolution of x [c, h, w] (pad k / 2), plus residual [o, h, w] when given: [o, h, w].
T::Tensor conv(const Conv& c, const T::Tensor& x, const T::Tensor* residual = nullptr) {
  const int64_t o = c.w.size(0), h = x.size(1), w = x.size(2);
  T::Lazy y = netops::lazyConv(c.w, x, c.k, c.k, c.k / 2, DType::F32) + T::lazy(c.b);
  if (residual != nullptr) y = y + T::lazy(residual->reshape({o, h * w}));
  return y.eval().reshape({o, h, w});
}

T::Tensor normSwish(const Norm& n, const T::Tensor& x) { return netops::groupNorm(x, kGroups, n.w, n.b, kEps, true); }

T::Tensor resBlock(const ResBlock& r, const T::Tensor& x) {
  const T::Tensor h = conv(r.conv1, normSwish(r.norm1, x));
  const T::Tensor skip = r.shortcut ? conv(*r.shortcut, x) : x;
  return conv(r.conv2, normSwish(r.norm2, h), &skip);
}

// x + proj_out(softmax(q kᵀ / sqrt(c)) v), the pixels as tokens of c channels, one head.
T::Tensor attention(const Attention& a, const T::Tensor& x) {
  const int64_t c = x.size(0), n = x.size(1) * x.size(2);
  const T::Tensor tokens =
      netops::groupNorm(x, kGroups, a.norm.w, a.norm.b, kEps, false).reshape({c, n}).transpose(0, 1).contiguous();
  const T::Tensor q = netops::affine(tokens, a.q, a.qb).unsqueeze(0);
  const T::Tensor k = netops::affine(tokens, a.k, a.kb).unsqueeze(0);
  const T::Tensor v = netops::affine(tokens, a.v, a.vb).unsqueeze(0);
  const T::Tensor o = netops::attention(q, k, v, 1.0 / std::sqrt(static_cast<double>(c))).reshape({n, c});
  const T::Tensor p = netops::affine(o, a.proj, a.projb);
  return (T::lazy(x.reshape({c, n})) + T::lazy(p.transpose(0, 1))).eval().reshape(x.shape());
}

// Nearest-neighbour x2: [c, h, w] to [c, 2h, 2w].
T::Tensor upsample2(const T::Tensor& x) {
  const int64_t c = x.size(0), h = x.size(1), w = x.size(2);
  return x.reshape({c, h, 1, w, 1}).expand({c, h, 2, w, 2}).contiguous().reshape({c, 2 * h, 2 * w});
}

// The parts with their tensors copied to g.
Norm moved(const Norm& n, const gizhw::gpu::Gpu& g) { return {n.w.on(g), n.b.on(g)}; }
Conv moved(const Conv& c, const gizhw::gpu::Gpu& g) { return {c.w.on(g), c.b.on(g), c.k}; }
ResBlock moved(const ResBlock& r, const gizhw::gpu::Gpu& g) {
  return {moved(r.norm1, g), moved(r.norm2, g), moved(r.conv1, g), moved(r.conv2, g),
          r.shortcut ? std::optional<Conv>(moved(*r.shortcut, g)) : std::nullopt};
}
Attention moved(const Attention& a, const gizhw::gpu::Gpu& g) {
  return {moved(a.norm, g), a.q.on(g),  a.k.on(g),  a.v.on(g),  a.proj.on(g),
          a.qb.on(g),       a.kb.on(g), a.vb.on(g), a.projb.on(g)};
}

}  // namespace

struct FluxVae::Weights {
  std::optional<gizhw::gpu::Gpu> gpu;  // where the tensors are; none: the host
  Conv convIn;
  ResBlock mid1, mid2;
  Attention attn;
  std::vector<Level> levels;  // level 0 (the image's resolution) first
  Norm normOut;
  Conv convOut;
  int64_t latent = 0;
};

FluxVae FluxVae::load(const std::string& path) {
  Reader r(path);
  auto w = std::make_shared<Weights>();
  const T::Shape in = r.shapeOf("conv_in.weight");
  if (in.size() != 4) r.fail("conv_in.weight", "has shape " + T::shapeText(in) + ", expected [c, z, 3, 3]");
  w->latent = in[1];
  int64_t c = r.outputs("conv_in.weight");
  w->convIn = r.conv("conv_in", w->latent, c, 3);
  w->mid1 = r.resBlock("mid.block_1", c, c);
  w->attn.norm = r.norm("mid.attn_1.norm", c);
  w->attn.q = r.linear("mid.attn_1.q.weight", c);
  w->attn.k = r.linear("mid.attn_1.k.weight", c);
  w->attn.v = r.linear("mid.attn_1.v.weight", c);
  w->attn.proj = r.linear("mid.attn_1.proj_out.weight", c);
  w->attn.qb = r.take("mid.attn_1.q.bias", {c});
  w->attn.kb = r.take("mid.attn_1.k.bias", {c});
  w->attn.vb = r.take("mid.attn_1.v.bias", {c});
  w->attn.projb = r.take("mid.attn_1.proj_out.bias", {c});
  w->mid2 = r.resBlock("mid.block_2", c, c);

  int64_t levels = 0;
  while (r.has("up." + std::to_string(levels) + ".block.0.conv1.weight")) ++levels;
  if (levels == 0) r.outputs("up.0.block.0.conv1.weight");  // names the missing tensor
  w->levels.resize(static_cast<size_t>(levels));
  // BFL's order: the deepest level first, each level's blocks changing c to its width.
  for (int64_t l = levels - 1; l >= 0; --l) {
    const std::string name = "up." + std::to_string(l);
    Level& level = w->levels[static_cast<size_t>(l)];
    for (int64_t b = 0; r.has(name + ".block." + std::to_string(b) + ".conv1.weight"); ++b) {
      const std::string block = name + ".block." + std::to_string(b);
      const int64_t o = r.outputs(block + ".conv1.weight");
      level.blocks.push_back(r.resBlock(block, c, o));
      c = o;
    }
    if (l != 0) level.upsample = r.conv(name + ".upsample.conv", c, c, 3);
  }
  w->normOut = r.norm("norm_out", c);
  w->convOut = r.conv("conv_out", c, r.outputs("conv_out.weight"), 3);
  r.requireAllTaken();
  FluxVae vae;
  vae.weights_ = std::move(w);
  return vae;
}

FluxVae FluxVae::to(const gizhw::gpu::Gpu& gpu) const {
  const Weights& w = *weights_;
  auto m = std::make_shared<Weights>();
  m->gpu = gpu;
  m->convIn = moved(w.convIn, gpu);
  m->mid1 = moved(w.mid1, gpu);
  m->mid2 = moved(w.mid2, gpu);
  m->attn = moved(w.attn, gpu);
  for (const Level& l : w.levels) {
    Level& level = m->levels.emplace_back();
    for (const ResBlock& b : l.blocks) level.blocks.push_back(moved(b, gpu));
    if (l.upsample) level.upsample = moved(*l.upsample, gpu);
  }
  m->normOut = moved(w.normOut, gpu);
  m->convOut = moved(w.convOut, gpu);
  m->latent = w.latent;
  FluxVae vae;
  vae.weights_ = std::move(m);
  return vae;
}

int64_t FluxVae::latentChannels() const { return weights_->latent; }
int64_t FluxVae::outChannels() const { return weights_->convOut.w.size(0); }
int64_t FluxVae::upscale() const { return int64_t{1} << (weights_->levels.size() - 1); }

T::Tensor FluxVae::decode(const T::Tensor& latents) const {
  const Weights& w = *weights_;
  if (latents.ndim() != 4 || latents.size(0) < 1 || latents.size(1) != w.latent || latents.size(2) < 1 || latents.size(3) < 1)
    throw Error("FluxVae::decode: latents of shape " + T::shapeText(latents.shape()) + " are not [n, " +
                std::to_string(w.latent) + ", h, w]");
  if (!isFloat(latents.dtype()))
    throw Error(std::string("FluxVae::decode: latents are ") + dtypeName(latents.dtype()) + ", not a float dtype");
  T::Tensor z = latents.host().cast(DType::F32), scale = T::scalar(kScale), shift = T::scalar(kShift);
  if (w.gpu) {
    z = z.on(*w.gpu);
    scale = scale.on(*w.gpu);
    shift = shift.on(*w.gpu);
  }
  std::vector<T::Tensor> images;
  for (int64_t i = 0; i < z.size(0); ++i) {
    const T::Tensor zi = (T::lazy(z.slice(0, i, i + 1).squeeze(0)) / T::lazy(scale) + T::lazy(shift)).eval();
    T::Tensor h = conv(w.convIn, zi);
    h = resBlock(w.mid2, attention(w.attn, resBlock(w.mid1, h)));
    for (auto level = w.levels.rbegin(); level != w.levels.rend(); ++level) {
      for (const ResBlock& b : level->blocks) h = resBlock(b, h);
      if (level->upsample) h = conv(*level->upsample, upsample2(h));
    }
    images.push_back(conv(w.convOut, normSwish(w.normOut, h)));
  }
  return T::stack(images, 0);
}

}  // namespace gizml::diffusion
