// Z-Image's DiT as ComfyUI's NextDiT runs it (comfy/ldm/lumina/model.py, Z-Image's settings;
// diffusers transformer_z_image.py computes the same): the weights read by ComfyUI's names, their
// sizes from their shapes; the forward pass in F32 on the CPU with tensor ops and netops'
// attention, affine and layerNorm, the blocks' attention and feed-forward linears in F32 or, as
// ZImageConfig::linears says, W8A8 (int8_linear.h).
#include <gizml/diffusion.h>
#include <gizml/netops.h>

#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "dit_layers.h"
#include "dit_ops.h"
#include "weight_file.h"

namespace gizml::diffusion {

namespace {

constexpr int64_t kMultiple = 32;      // both token runs are padded to a multiple of this
constexpr int64_t kFrequencies = 256;  // the time sinusoid's width
constexpr double kFinalEps = 1e-6;     // the final LayerNorm's

struct Block {
  Projection qkv, out;                                 // [3 dim, dim], [dim, dim]
  T::Tensor qNorm, kNorm;                              // [head dim]
  T::Tensor attnNorm1, attnNorm2, ffnNorm1, ffnNorm2;  // [dim]
  Projection w1, w2, w3;                               // SwiGLU: w2(silu(w1 x) w3 x)
  std::optional<Linear> modulation;                    // adaLN_modulation.0: [4 dim, adaLN width]
};

}  // namespace

struct ZImageDit::Weights {
  ZImageConfig config;
  std::optional<gizhw::gpu::Gpu> gpu;  // where the tensors are; none: the host
  int64_t dim = 0, headDim = 0, channels = 0, captionDim = 0;
  Linear tEmbed0, tEmbed2;  // sinusoid -> mid -> adaLN width, SiLU between
  T::Tensor captionNorm;
  Linear captionEmbed, xEmbed;
  T::Tensor xPad, captionPad;  // [1, dim]
  std::vector<Block> noiseRefiner, contextRefiner, layers;
  Linear finalModulation, finalLinear;  // after SiLU; [dim, adaLN width], [patch² channels, dim]
};

namespace {

using Weights = ZImageDit::Weights;

Block moved(const Block& b, const gizhw::gpu::Gpu& g) {
  Block m;
  m.qkv = b.qkv.to(g);
  m.out = b.out.to(g);
  m.qNorm = b.qNorm.on(g);
  m.kNorm = b.kNorm.on(g);
  m.attnNorm1 = b.attnNorm1.on(g);
  m.attnNorm2 = b.attnNorm2.on(g);
  m.ffnNorm1 = b.ffnNorm1.on(g);
  m.ffnNorm2 = b.ffnNorm2.on(g);
  m.w1 = b.w1.to(g);
  m.w2 = b.w2.to(g);
  m.w3 = b.w3.to(g);
  if (b.modulation) m.modulation = moved(*b.modulation, g);
  return m;
}

// t (made on the host) where the weights are.
T::Tensor placed(const Weights& w, const T::Tensor& t) { return w.gpu ? t.on(*w.gpu) : t; }

Projection takeProjection(WeightFile& f, const Weights& w, const std::string& name, const T::Shape& shape) {
  return Projection::of(f.takeStored(name, shape), w.config.linears == ZImageConfig::Linears::Int8);
}

Block takeBlock(WeightFile& f, const Weights& w, const std::string& name, int64_t adaln, bool modulated) {
  const int64_t d = w.dim, hidden = outputs(f, name + ".feed_forward.w1.weight");
  Block b;
  b.qkv = takeProjection(f, w, name + ".attention.qkv.weight", {3 * d, d});
  b.out = takeProjection(f, w, name + ".attention.out.weight", {d, d});
  b.qNorm = f.take(name + ".attention.q_norm.weight", {w.headDim});
  b.kNorm = f.take(name + ".attention.k_norm.weight", {w.headDim});
  b.attnNorm1 = f.take(name + ".attention_norm1.weight", {d});
  b.attnNorm2 = f.take(name + ".attention_norm2.weight", {d});
  b.ffnNorm1 = f.take(name + ".ffn_norm1.weight", {d});
  b.ffnNorm2 = f.take(name + ".ffn_norm2.weight", {d});
  b.w1 = takeProjection(f, w, name + ".feed_forward.w1.weight", {hidden, d});
  b.w2 = takeProjection(f, w, name + ".feed_forward.w2.weight", {d, hidden});
  b.w3 = takeProjection(f, w, name + ".feed_forward.w3.weight", {hidden, d});
  if (modulated) b.modulation = takeLinear(f, name + ".adaLN_modulation.0", adaln, 4 * d, true);
  return b;
}

std::vector<Block> takeBlocks(WeightFile& f, const Weights& w, const std::string& prefix, int64_t adaln,
                              bool modulated) {
  std::vector<Block> blocks;
  for (int64_t i = 0; f.has(prefix + std::to_string(i) + ".attention.qkv.weight"); ++i)
    blocks.push_back(takeBlock(f, w, prefix + std::to_string(i), adaln, modulated));
  if (blocks.empty()) f.shapeOf(prefix + "0.attention.qkv.weight");  // names the missing tensor
  return blocks;
}

// One block on x [tokens, dim]; adaln [1, adaLN width] for a modulated block.
T::Tensor block(const Weights& w, const Block& b, const T::Tensor& x, const Rope& r, const T::Tensor& adaln) {
  const double eps = w.config.normEps;
  const int64_t n = x.size(0), d = w.dim, heads = d / w.headDim;
  T::Lazy scaleMsa(1.0), gateMsa(1.0), scaleMlp(1.0), gateMlp(1.0);
  if (b.modulation) {
    const T::Tensor m = linear(*b.modulation, adaln);  // [1, 4 dim]: scale, gate, scale, gate
    scaleMsa = T::Lazy(1.0) + T::lazy(m.slice(1, 0, d));
    gateMsa = T::lazy(m.slice(1, d, 2 * d)).tanh();
    scaleMlp = T::Lazy(1.0) + T::lazy(m.slice(1, 2 * d, 3 * d));
    gateMlp = T::lazy(m.slice(1, 3 * d, 4 * d)).tanh();
  }

  const T::Tensor h = (T::lazy(rmsNorm(x, b.attnNorm1, eps)) * scaleMsa).eval();
  const T::Tensor qkv = b.qkv(h);  // [n, 3 dim]
  const auto headsOf = [&](int64_t part) {
    return qkv.slice(1, part * d, (part + 1) * d).reshape({n, heads, w.headDim});
  };
  const T::Tensor q = rotated(rmsNorm(headsOf(0), b.qNorm, eps), r).transpose(0, 1).contiguous();
  const T::Tensor k = rotated(rmsNorm(headsOf(1), b.kNorm, eps), r).transpose(0, 1).contiguous();
  const T::Tensor v = headsOf(2).transpose(0, 1).contiguous();
  const T::Tensor o = netops::attention(q, k, v, 1.0 / std::sqrt(static_cast<double>(w.headDim)));
  const T::Tensor attn = b.out(o.transpose(0, 1).reshape({n, d}));
  const T::Tensor x1 = (T::lazy(x) + gateMsa * T::lazy(rmsNorm(attn, b.attnNorm2, eps))).eval();

  const T::Tensor g = (T::lazy(rmsNorm(x1, b.ffnNorm1, eps)) * scaleMlp).eval();
  const T::Tensor gated = (T::lazy(b.w1(g)).silu() * T::lazy(b.w3(g))).eval();
  const T::Tensor ffn = b.w2(gated);
  return (T::lazy(x1) + gateMlp * T::lazy(rmsNorm(ffn, b.ffnNorm2, eps))).eval();
}

Rope ropeOf(const ZImageConfig& c, const std::vector<std::array<int64_t, 3>>& positions) {
  std::vector<double> flat;
  for (const auto& p : positions) flat.insert(flat.end(), p.begin(), p.end());
  return ropeTables(flat, c.ropeAxes, c.ropeTheta);
}

// rows [n, dim] followed by pad tokens up to a multiple of 32.
T::Tensor padded(const T::Tensor& rows, const T::Tensor& pad) {
  const int64_t n = rows.size(0), extra = (kMultiple - n % kMultiple) % kMultiple;
  if (extra == 0) return rows;
  return T::concat({rows, pad.expand({extra, pad.size(1)})}, 0);
}

int64_t roundUp(int64_t n) { return (n + kMultiple - 1) / kMultiple * kMultiple; }

}  // namespace

ZImageDit ZImageDit::load(const std::string& path, const ZImageConfig& config) {
  WeightFile f(path, "", "a Z-Image DiT");
  auto w = std::make_shared<Weights>();
  w->config = config;
  const T::Shape xShape = f.shapeOf("x_embedder.weight");
  if (xShape.size() != 2 || config.patch < 1 || xShape[1] % (config.patch * config.patch) != 0)
    f.fail("x_embedder.weight", "has shape " + T::shapeText(xShape) + ", expected [dim, patch² channels] with patch " +
                                    std::to_string(config.patch));
  w->dim = outputs(f, "x_embedder.weight");
  w->channels = xShape[1] / (config.patch * config.patch);
  const T::Shape qn = f.shapeOf("layers.0.attention.q_norm.weight");
  int64_t ropeDims = 0;
  for (int64_t a : config.ropeAxes) ropeDims += a;
  bool axesEven = config.ropeAxes.size() == 3;
  for (int64_t a : config.ropeAxes) axesEven = axesEven && a > 0 && a % 2 == 0;
  if (qn.size() != 1 || qn[0] < 1 || w->dim % qn[0] != 0 || qn[0] != ropeDims || !axesEven)
    f.fail("layers.0.attention.q_norm.weight", "has shape " + T::shapeText(qn) + ", expected [head dim] dividing " +
                                                   std::to_string(w->dim) + " and the sum of 3 even RoPE axes " +
                                                   std::to_string(ropeDims));
  w->headDim = qn[0];
  const T::Shape capNorm = f.shapeOf("cap_embedder.0.weight");
  if (capNorm.size() != 1 || capNorm[0] < 1)
    f.fail("cap_embedder.0.weight", "has shape " + T::shapeText(capNorm) + ", expected [caption dim]");
  w->captionDim = capNorm[0];

  const int64_t mid = outputs(f, "t_embedder.mlp.0.weight"), adaln = outputs(f, "t_embedder.mlp.2.weight");
  w->tEmbed0 = takeLinear(f, "t_embedder.mlp.0", kFrequencies, mid, true);
  w->tEmbed2 = takeLinear(f, "t_embedder.mlp.2", mid, adaln, true);
  w->captionNorm = f.take("cap_embedder.0.weight", {w->captionDim});
  w->captionEmbed = takeLinear(f, "cap_embedder.1", w->captionDim, w->dim, true);
  w->xEmbed = takeLinear(f, "x_embedder", xShape[1], w->dim, true);
  w->xPad = f.take("x_pad_token", {1, w->dim});
  w->captionPad = f.take("cap_pad_token", {1, w->dim});
  w->noiseRefiner = takeBlocks(f, *w, "noise_refiner.", adaln, true);
  w->contextRefiner = takeBlocks(f, *w, "context_refiner.", adaln, false);
  w->layers = takeBlocks(f, *w, "layers.", adaln, true);
  w->finalModulation = takeLinear(f, "final_layer.adaLN_modulation.1", adaln, w->dim, true);
  w->finalLinear = takeLinear(f, "final_layer.linear", w->dim, xShape[1], true);
  f.requireAllTaken();
  ZImageDit dit;
  dit.weights_ = std::move(w);
  return dit;
}

ZImageDit ZImageDit::to(const gizhw::gpu::Gpu& gpu) const {
  const Weights& w = *weights_;
  auto m = std::make_shared<Weights>();
  m->config = w.config;
  m->gpu = gpu;
  m->dim = w.dim;
  m->headDim = w.headDim;
  m->channels = w.channels;
  m->captionDim = w.captionDim;
  m->tEmbed0 = moved(w.tEmbed0, gpu);
  m->tEmbed2 = moved(w.tEmbed2, gpu);
  m->captionNorm = w.captionNorm.on(gpu);
  m->captionEmbed = moved(w.captionEmbed, gpu);
  m->xEmbed = moved(w.xEmbed, gpu);
  m->xPad = w.xPad.on(gpu);
  m->captionPad = w.captionPad.on(gpu);
  m->noiseRefiner = movedAll(w.noiseRefiner, gpu);
  m->contextRefiner = movedAll(w.contextRefiner, gpu);
  m->layers = movedAll(w.layers, gpu);
  m->finalModulation = moved(w.finalModulation, gpu);
  m->finalLinear = moved(w.finalLinear, gpu);
  ZImageDit dit;
  dit.weights_ = std::move(m);
  return dit;
}

int64_t ZImageDit::channels() const { return weights_->channels; }
int64_t ZImageDit::captionDim() const { return weights_->captionDim; }
int64_t ZImageDit::dim() const { return weights_->dim; }

T::Tensor ZImageDit::forward(const T::Tensor& latent, double sigma, const T::Tensor& caption) const {
  const Weights& w = *weights_;
  const int64_t p = w.config.patch, c = w.channels;
  if (latent.ndim() != 4 || latent.size(0) != 1 || latent.size(1) != c || latent.size(2) < p ||
      latent.size(3) < p || latent.size(2) % p != 0 || latent.size(3) % p != 0)
    throw Error("ZImageDit::forward: latent of shape " + T::shapeText(latent.shape()) + " is not [1, " +
                std::to_string(c) + ", h, w] with h, w multiples of " + std::to_string(p));
  if (caption.ndim() != 2 || caption.size(0) < 1 || caption.size(1) != w.captionDim)
    throw Error("ZImageDit::forward: caption of shape " + T::shapeText(caption.shape()) + " is not [tokens, " +
                std::to_string(w.captionDim) + "]");
  if (!isFloat(latent.dtype()) || !isFloat(caption.dtype()))
    throw Error("ZImageDit::forward: latent and caption must have float dtypes");
  if (!(sigma >= 0.0 && sigma <= 1.0))
    throw Error("ZImageDit::forward: sigma " + std::to_string(sigma) + " is not in [0, 1]");

  // The time embedding: ComfyUI's t = 1 - sigma and 1000 t in float32, a [cos, sin] sinusoid.
  const float t = 1000.0f * (1.0f - static_cast<float>(sigma));
  const T::Tensor temb = placed(w, timeSinusoid(t, kFrequencies));
  const T::Tensor adaln = linear(w.tEmbed2, T::lazy(linear(w.tEmbed0, temb)).silu().eval());

  // The latent's p x p patches as tokens, features ordered (row in patch, column in patch, channel).
  const int64_t hp = latent.size(2) / p, wp = latent.size(3) / p, nImage = hp * wp;
  const T::Tensor patches = placed(w, latent.host()
                                         .cast(DType::F32)
                                         .reshape({c, hp, p, wp, p})
                                         .permute({1, 3, 2, 4, 0})
                                         .contiguous()
                                         .reshape({nImage, p * p * c}));
  const int64_t nCaption = caption.size(0), captionLen = roundUp(nCaption), imageLen = roundUp(nImage);

  std::vector<std::array<int64_t, 3>> captionPos, imagePos;
  for (int64_t i = 0; i < captionLen; ++i) captionPos.push_back({1 + i, 0, 0});
  for (int64_t i = 0; i < imageLen; ++i)
    imagePos.push_back(i < nImage ? std::array<int64_t, 3>{captionLen + 1, i / wp, i % wp}
                                  : std::array<int64_t, 3>{0, 0, 0});
  Rope captionRope = ropeOf(w.config, captionPos), imageRope = ropeOf(w.config, imagePos);
  for (Rope* r : {&captionRope, &imageRope}) *r = {placed(w, r->cos), placed(w, r->sin)};

  T::Tensor img = padded(linear(w.xEmbed, patches), w.xPad);
  for (const Block& b : w.noiseRefiner) img = block(w, b, img, imageRope, adaln);
  const T::Tensor captionRows = placed(w, caption.host().cast(DType::F32).contiguous());
  T::Tensor cap = padded(linear(w.captionEmbed, rmsNorm(captionRows, w.captionNorm, w.config.normEps)), w.captionPad);
  for (const Block& b : w.contextRefiner) cap = block(w, b, cap, captionRope, adaln);

  T::Tensor x = T::concat({cap, img}, 0);
  const Rope rope{T::concat({captionRope.cos, imageRope.cos}, 0), T::concat({captionRope.sin, imageRope.sin}, 0)};
  for (const Block& b : w.layers) x = block(w, b, x, rope, adaln);

  // The final layer on the image's tokens: LayerNorm (no affine) times 1 + Linear(SiLU(adaln)).
  const T::Tensor tokens = x.slice(0, captionLen, captionLen + nImage).contiguous();
  const T::Tensor normed =
      netops::layerNorm(tokens, placed(w, T::ones({w.dim})), placed(w, T::zeros({w.dim})), kFinalEps)[0];
  const T::Tensor scale = linear(w.finalModulation, T::lazy(adaln).silu().eval());
  const T::Tensor out = linear(w.finalLinear, (T::lazy(normed) * (T::Lazy(1.0) + T::lazy(scale))).eval());
  // ComfyUI returns minus the network's output, unpatchified to [1, c, h, w].
  return (-T::lazy(out.reshape({hp, wp, p, p, c}).permute({4, 0, 2, 1, 3}).contiguous()))
      .eval()
      .reshape({1, c, hp * p, wp * p});
}

}  // namespace gizml::diffusion
