// MiniMax H3's video decoder as diffusers runs it (models/autoencoders/autoencoder_kl_minimax_h3.py:
// MiniMaxH3VideoViTDecoder3d, AutoencoderKLMiniMaxH3._decode and _decode_clip): the weights by the
// original checkpoint's names or diffusers', sizes from their shapes; the ViT in F32 on the CPU with
// netops' affine, attendedRows (q/k RMSNorm and the partial rotate-half RoPE in its HeadPrep) and
// layerNorm; the clip decoded in chunks of latent frames and spatial tiles, blended as diffusers does.
#include <gizml/diffusion.h>
#include <gizml/netops.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "h3_latents.h"
#include "dit_ops.h"
#include "weight_file.h"

namespace gizml::diffusion {

namespace {

constexpr int64_t kColours = 3;
// The ImageNet convention the decoder's pixels are in (the pipeline's pixel_mean / pixel_std).
constexpr float kPixelMean[kColours] = {0.485f, 0.456f, 0.406f};
constexpr float kPixelStd[kColours] = {0.229f, 0.224f, 0.225f};

struct Linear {
  T::Tensor w, b;  // [out, in], [out]
  T::Tensor operator()(const T::Tensor& x) const { return netops::affine(x, w, b); }
};

struct Block {
  T::Tensor norm1, norm2, scale1, scale2;  // [dim]
  Linear qkv;                              // rows [q of every head; k; v]
  Linear out;
  Linear ffIn;  // rows [gate; up], SwiGLU: down(silu(gate) up)
  Linear down;
};

// Python's a % m for m > 0.
int64_t floorMod(int64_t a, int64_t m) { return ((a % m) + m) % m; }

}  // namespace

struct H3VideoDecoder::Weights {
  H3VideoConfig config;
  int64_t channels = 0, dim = 0, heads = 0, registers = 0;
  Linear postQuant, projIn, projOut;
  T::Tensor registerTokens;  // [registers, dim]
  std::vector<Block> blocks;
  T::Tensor normOutW, normOutB;
};

namespace {

using Weights = H3VideoDecoder::Weights;

// The decoder's tensors by either naming, checked against the sizes read so far.
class Reader : public WeightFile {
 public:
  explicit Reader(const std::string& path) : WeightFile(path, "", "a MiniMax H3 video decoder") {
    original_ = has("decoder.x_embedder.weight");
  }

  bool original() const { return original_; }

  Linear linear(const std::string& name, int64_t in, int64_t out) {
    return {take(name + ".weight", {out, in}), take(name + ".bias", {out})};
  }

  // The dimension `axis` of a tensor's stored shape, which must have `rank` axes.
  int64_t size(const std::string& name, size_t rank, size_t axis) const {
    const T::Shape s = shapeOf(name);
    if (s.size() != rank || s[axis] < 1)
      fail(name, "has shape " + T::shapeText(s) + ", expected " + std::to_string(rank) + " axes");
    return s[axis];
  }

  Block block(const std::string& name, int64_t dim, int64_t heads, int64_t headDim) {
    Block b;
    b.norm1 = take(name + ".norm1.weight", {dim});
    b.norm2 = take(name + ".norm2.weight", {dim});
    b.scale1 = take(name + ".scale1", {dim});
    b.scale2 = take(name + ".scale2", {dim});
    if (original_) {
      // Per-head interleaved [head 0: q k v, head 1: q k v, ...] to [q; k; v].
      const Linear fused = linear(name + ".attn.to_qkv", dim, 3 * dim);
      b.qkv = {fused.w.reshape({heads, 3, headDim, dim}).permute({1, 0, 2, 3}).contiguous().reshape({3 * dim, dim}),
               fused.b.reshape({heads, 3, headDim}).permute({1, 0, 2}).contiguous().reshape({3 * dim})};
      b.out = linear(name + ".attn.to_out", dim, dim);
      const int64_t inner = size(name + ".ff.w2.weight", 2, 1);
      b.ffIn = linear(name + ".ff.w1", dim, 2 * inner);
      b.down = linear(name + ".ff.w2", inner, dim);
    } else {
      const Linear q = linear(name + ".attn.to_q", dim, dim), k = linear(name + ".attn.to_k", dim, dim),
                   v = linear(name + ".attn.to_v", dim, dim);
      b.qkv = {T::concat({q.w, k.w, v.w}, 0), T::concat({q.b, k.b, v.b}, 0)};
      b.out = linear(name + ".attn.to_out.0", dim, dim);
      const int64_t inner = size(name + ".ff.net.2.weight", 2, 1);
      // diffusers' SwiGLU reads [up; gate].
      const Linear upGate = linear(name + ".ff.net.0.proj", dim, 2 * inner);
      b.ffIn = {T::concat({upGate.w.slice(0, inner, 2 * inner), upGate.w.slice(0, 0, inner)}, 0),
                T::concat({upGate.b.slice(0, inner, 2 * inner), upGate.b.slice(0, 0, inner)}, 0)};
      b.down = linear(name + ".ff.net.2", inner, dim);
    }
    return b;
  }

 private:
  bool original_ = false;
};

// The RoPE of the tokens of a t x h x w grid (then `extra` tokens at position 0), as HeadPrep's
// cos and sin [tokens, half]: each axis' coordinates (i + 0.5) / size mapped to [-1, 1), times 2 pi
// and theta^-(6 j / rope dims); the axes' angles (t's, h's, w's) side by side.
std::vector<T::Tensor> ropeOf(const H3VideoConfig& c, int64_t t, int64_t h, int64_t w, int64_t extra) {
  const int64_t ropeDims = static_cast<int64_t>(static_cast<double>(c.headDim) * c.ropeRatio);
  const int64_t perAxis = ropeDims / 6, half = 3 * perAxis;
  // torch: 1 / theta ** arange(0, 1, 6 / dims), in float32.
  std::vector<float> invFreq(static_cast<size_t>(perAxis));
  for (int64_t j = 0; j < perAxis; ++j) {
    const float e = static_cast<float>(j) * (6.0f / static_cast<float>(ropeDims));
    invFreq[static_cast<size_t>(j)] = 1.0f / std::pow(static_cast<float>(c.ropeTheta), e);
  }
  const int64_t n = t * h * w + extra;
  T::Tensor cos = T::ones({n, half}), sin = T::zeros({n, half});
  float* cp = cos.data<float>();
  float* sp = sin.data<float>();
  const auto coordinate = [](int64_t i, int64_t size) {
    return 2.0f * ((static_cast<float>(i) + 0.5f) / static_cast<float>(size)) - 1.0f;
  };
  const float twoPi = static_cast<float>(2.0 * std::numbers::pi);
  for (int64_t ti = 0; ti < t; ++ti)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t wi = 0; wi < w; ++wi) {
        const int64_t row = (ti * h + hi) * w + wi;
        const float pos[3] = {coordinate(ti, t), coordinate(hi, h), coordinate(wi, w)};
        for (int64_t a = 0; a < 3; ++a)
          for (int64_t j = 0; j < perAxis; ++j) {
            const float angle = twoPi * pos[a] * invFreq[static_cast<size_t>(j)];
            cp[row * half + a * perAxis + j] = std::cos(angle);
            sp[row * half + a * perAxis + j] = std::sin(angle);
          }
      }
  return {cos, sin};
}

// The ViT on one tile of latents z [channels, t, h, w]: pixels [3, t patchT, h patch, w patch].
T::Tensor vit(const Weights& w, const T::Tensor& z) {
  const H3VideoConfig& c = w.config;
  const int64_t t = z.size(1), h = z.size(2), wd = z.size(3), n = t * h * wd;
  const int64_t headDim = c.headDim;
  T::Tensor x = w.projIn(w.postQuant(z.reshape({w.channels, n}).transpose(0, 1).contiguous()));
  x = T::concat({x, w.registerTokens, T::zeros({1, w.dim})}, 0);
  const std::vector<T::Tensor> rope = ropeOf(c, t, h, wd, w.registers + 1);
  netops::HeadPrep prep{T::ones({headDim}), T::ones({headDim}), rope[0], rope[1], c.eps};
  for (const Block& b : w.blocks) {
    const T::Tensor qkv = b.qkv(rmsNorm(x, b.norm1, c.eps));
    const T::Tensor attn = b.out(netops::attendedRows(qkv, w.heads, headDim, false, 0, {prep}));
    x = (T::lazy(x) + T::lazy(attn) * T::lazy(b.scale1)).eval();
    const T::Tensor g = b.ffIn(rmsNorm(x, b.norm2, c.eps));
    const int64_t inner = g.size(1) / 2;
    const T::Tensor gated = (T::lazy(g.slice(1, 0, inner)).silu() * T::lazy(g.slice(1, inner, 2 * inner))).eval();
    x = (T::lazy(x) + T::lazy(b.down(gated)) * T::lazy(b.scale2)).eval();
  }
  const T::Tensor y = w.projOut(netops::layerNorm(x.slice(0, 0, n), w.normOutW, w.normOutB, c.eps)[0]);
  const int64_t p = c.patch, pt = c.patchT;
  return y.reshape({t, h, wd, kColours, pt, p, p})
      .permute({3, 0, 4, 1, 5, 2, 6})
      .contiguous()
      .reshape({kColours, t * pt, h * p, wd * p});
}

// diffusers' _blend: the first `extent` entries of b along axis cross-faded from a's last ones.
T::Tensor blend(const T::Tensor& a, const T::Tensor& b, int64_t extent, int64_t axis) {
  extent = std::min({a.size(axis), b.size(axis), extent});
  if (extent <= 0) return b;
  T::Shape shape(4, 1);
  shape[static_cast<size_t>(axis)] = extent;
  std::vector<double> wa, wb;
  for (int64_t i = 0; i < extent; ++i) {
    const float r = static_cast<float>(i) / static_cast<float>(extent);
    wa.push_back(1.0f - r);
    wb.push_back(r);
  }
  const T::Tensor mixed = (T::lazy(a.slice(axis, a.size(axis) - extent, a.size(axis))) * T::lazy(T::tensor(shape, wa)) +
                           T::lazy(b.slice(axis, 0, extent)) * T::lazy(T::tensor(shape, wb)))
                              .eval();
  if (extent == b.size(axis)) return mixed;
  return T::concat({mixed, b.slice(axis, extent, b.size(axis))}, axis);
}

// diffusers' _split_tiles: tiles of `tile` pixels over `length` overlapping by at least
// `overlap`, the slack spread over the overlaps in steps of `ratio`. Returns the starts; the
// overlaps into `overlaps`.
std::vector<int64_t> splitTiles(int64_t length, int64_t tile, int64_t overlap, int64_t ratio,
                                std::vector<int64_t>& overlaps) {
  overlaps.clear();
  if (tile <= 0 || tile >= length) return {0};
  int64_t count = (length + tile - 1) / tile;
  while (tile * count - overlap * (count - 1) - length < 0) ++count;
  overlaps.assign(static_cast<size_t>(count - 1), overlap);
  const int64_t remaining = tile * count - overlap * (count - 1) - length;
  for (int64_t i = 0; i < remaining / ratio; ++i) overlaps[static_cast<size_t>(i % (count - 1))] += ratio;
  std::vector<int64_t> starts = {0};
  for (int64_t i = 0; i + 1 < count; ++i) starts.push_back(starts.back() + tile - overlaps[static_cast<size_t>(i)]);
  return starts;
}

// diffusers' _decode_clip: the clip's latents [channels, t, h, w] as tiles, each through the ViT,
// stitched: each tile cross-faded from the (unblended) one above and the one to its left, the
// overlaps cut from all but the last row and column.
T::Tensor decodeClip(const Weights& w, const T::Tensor& z) {
  const H3VideoConfig& c = w.config;
  const int64_t p = c.patch;
  std::vector<int64_t> yOverlaps, xOverlaps;
  const std::vector<int64_t> ys = splitTiles(z.size(2) * p, c.tile, c.tileOverlap, p, yOverlaps);
  const std::vector<int64_t> xs = splitTiles(z.size(3) * p, c.tile, c.tileOverlap, p, xOverlaps);
  const int64_t yLen = ys.size() == 1 ? z.size(2) * p : c.tile, xLen = xs.size() == 1 ? z.size(3) * p : c.tile;
  std::vector<std::vector<T::Tensor>> tiles;
  for (int64_t y : ys) {
    auto& row = tiles.emplace_back();
    for (int64_t x : xs) row.push_back(vit(w, z.slice(2, y / p, y / p + yLen / p).slice(3, x / p, x / p + xLen / p)));
  }
  std::vector<T::Tensor> rows;
  for (size_t i = 0; i < tiles.size(); ++i) {
    std::vector<T::Tensor> row;
    for (size_t j = 0; j < tiles[i].size(); ++j) {
      T::Tensor tile = tiles[i][j];
      if (i > 0) tile = blend(tiles[i - 1][j], tile, yOverlaps[i - 1], 2);
      if (j > 0) tile = blend(tiles[i][j - 1], tile, xOverlaps[j - 1], 3);
      if (i + 1 < tiles.size()) tile = tile.slice(2, 0, tile.size(2) - yOverlaps[i]);
      if (j + 1 < tiles[i].size()) tile = tile.slice(3, 0, tile.size(3) - xOverlaps[j]);
      row.push_back(tile);
    }
    rows.push_back(T::concat(row, 3));
  }
  return T::concat(rows, 2);
}

}  // namespace

H3VideoDecoder H3VideoDecoder::load(const std::string& path, const H3VideoConfig& config) {
  Reader r(path);
  auto w = std::make_shared<Weights>();
  w->config = config;
  const std::string in = r.original() ? "decoder.x_embedder" : "decoder.proj_in";
  w->channels = r.size("post_quant_conv.weight", 5, 0);
  w->postQuant = {r.take("post_quant_conv.weight", {w->channels, w->channels, 1, 1, 1}).reshape({w->channels, w->channels}),
                  r.take("post_quant_conv.bias", {w->channels})};
  w->dim = r.size(in + ".weight", 2, 0);
  if (config.headDim < 6 || w->dim % config.headDim != 0)
    r.fail(in + ".weight", "makes a width of " + std::to_string(w->dim) + ", which heads of " +
                               std::to_string(config.headDim) + " do not divide");
  const int64_t ropeDims = static_cast<int64_t>(static_cast<double>(config.headDim) * config.ropeRatio);
  if (ropeDims < 6 || ropeDims % 6 != 0 || ropeDims > config.headDim)
    throw Error("H3VideoDecoder::load: a RoPE of " + std::to_string(ropeDims) + " channels a head (head " +
                std::to_string(config.headDim) + " x ratio) is not a positive multiple of 6 within the head");
  if (config.patch < 1 || config.patchT < 1 || config.clipLength < 1 || config.tokenDrop < 0 || config.tile < 0 ||
      config.tileOverlap < 0 || config.latentsMean.size() != static_cast<size_t>(w->channels) ||
      config.latentsStd.size() != static_cast<size_t>(w->channels))
    throw Error("H3VideoDecoder::load: the config needs positive patches and clip length, tiles and overlaps of at "
                "least 0 and " + std::to_string(w->channels) + " latent means and stds (" + path + " has " +
                std::to_string(w->channels) + " latent channels)");
  // Tiles cut at whole latents and advance (a tile no larger than its overlap never would).
  if (config.tile > 0 && (config.tileOverlap >= config.tile || config.tile % config.patch != 0 ||
                          config.tileOverlap % config.patch != 0))
    throw Error("H3VideoDecoder::load: tiles of " + std::to_string(config.tile) + " pixels overlapping by " +
                std::to_string(config.tileOverlap) + " must be multiples of the patch (" +
                std::to_string(config.patch) + "), the overlap below the tile (or tile 0: none)");
  // A clip keeps fewer latents than it has frames, so frame counts of clip n + latents exist.
  if ((config.clipLength + config.patchT - 1) / config.patchT >= config.clipLength)
    throw Error("H3VideoDecoder::load: a clip of " + std::to_string(config.clipLength) + " frames in steps of " +
                std::to_string(config.patchT) + " keeps as many latents as frames");
  w->heads = w->dim / config.headDim;
  w->projIn = r.linear(in, w->channels, w->dim);
  // [1, registers, dim] as stored (or [registers, dim], as stable-diffusion.cpp declares it).
  const T::Shape rs = r.shapeOf("decoder.register_tokens");
  w->registers = rs.size() == 2 ? rs[0] : r.size("decoder.register_tokens", 3, 1);
  w->registerTokens = r.take("decoder.register_tokens", rs.size() == 2 ? T::Shape{w->registers, w->dim}
                                                                      : T::Shape{1, w->registers, w->dim})
                          .reshape({w->registers, w->dim});
  // Masked training's token, never read: any shape.
  if (r.has("decoder.mask_token")) r.take("decoder.mask_token", r.shapeOf("decoder.mask_token"));
  for (int64_t i = 0; r.has("decoder.transformer_blocks." + std::to_string(i) + ".norm1.weight"); ++i)
    w->blocks.push_back(r.block("decoder.transformer_blocks." + std::to_string(i), w->dim, w->heads, config.headDim));
  if (w->blocks.empty()) r.shapeOf("decoder.transformer_blocks.0.norm1.weight");  // names the missing tensor
  w->normOutW = r.take("decoder.norm_out.weight", {w->dim});
  w->normOutB = r.take("decoder.norm_out.bias", {w->dim});
  w->projOut = r.linear("decoder.proj_out", w->dim, kColours * config.patchT * config.patch * config.patch);
  r.requireAllTaken("decoder.");
  H3VideoDecoder d;
  d.weights_ = std::move(w);
  return d;
}

int64_t H3VideoDecoder::latentChannels() const { return weights_->channels; }
const H3VideoConfig& H3VideoDecoder::config() const { return weights_->config; }

T::Tensor H3VideoDecoder::decode(const T::Tensor& latents) const {
  const Weights& w = *weights_;
  const H3VideoConfig& c = w.config;
  if (latents.ndim() != 5 || latents.size(0) != 1 || latents.size(1) != w.channels || latents.size(2) < 3 ||
      latents.size(3) < 1 || latents.size(4) < 1)
    throw Error("H3VideoDecoder::decode: latents of shape " + T::shapeText(latents.shape()) + " are not [1, " +
                std::to_string(w.channels) + ", t >= 3, h, w]");
  if (!isFloat(latents.dtype()))
    throw Error(std::string("H3VideoDecoder::decode: latents are ") + dtypeName(latents.dtype()) +
                ", not a float dtype");
  T::Tensor z = h3Denormalized(latents, c.latentsMean, c.latentsStd).squeeze(0);  // [channels, t, h, w]

  // diffusers' _decode: the encoder's chunks of clipLength frames, less tokenDrop latents each,
  // decoded as chunks of `chunk` latents plus `overlapTokens` more, cross-faded over `overlapFrames`.
  const int64_t ratio = c.patchT, chunk = (c.clipLength + ratio - 1) / ratio;
  const int64_t overlapTokens = floorMod(-c.tokenDrop, chunk), prePadding = floorMod(-c.clipLength, ratio);
  const int64_t overlapFrames = std::max<int64_t>(overlapTokens * ratio - prePadding, 0);
  const int64_t chunkFrames = chunk * ratio, t = z.size(1), tokens = t + c.tokenDrop;
  const int64_t padTokens = floorMod(-tokens, chunk);
  const int64_t chunks = (tokens + padTokens) / chunk - (c.tokenDrop > 0 ? 1 : 0);
  if (padTokens > 0) z = T::concat({z, z.slice(1, t - 1, t).expand({w.channels, padTokens, z.size(2), z.size(3)})}, 1);

  std::vector<T::Tensor> pieces;
  T::Tensor overlap;
  bool haveOverlap = false;
  for (int64_t i = 0; i < chunks; ++i) {
    const T::Tensor clip = decodeClip(w, z.slice(1, i * chunk, i * chunk + chunk + overlapTokens));
    for (int64_t j = 0; j < (c.tokenDrop > 0 ? 2 : 1); ++j) {
      T::Tensor piece = clip.slice(1, j * chunkFrames, (j + 1) * chunkFrames);
      piece = piece.slice(1, prePadding, piece.size(1));
      if (j == 0) {
        if (haveOverlap) piece = blend(overlap, piece, overlapFrames, 1);
        pieces.push_back(piece);
      } else {
        overlap = piece;
        haveOverlap = true;
      }
    }
  }
  if (haveOverlap) pieces.push_back(overlap);
  T::Tensor frames = T::concat(pieces, 1);
  // The padding latents' frames: the last latent of an encoder chunk covers clipLength % ratio.
  if (padTokens > 0) {
    const int64_t tail = c.clipLength % ratio;
    int64_t cut = 0;
    for (int64_t k = 0; k < padTokens; ++k) cut += tail != 0 && (t + k) % chunk == 0 ? tail : ratio;
    frames = frames.slice(1, 0, frames.size(1) - cut);
  }
  const T::Tensor mean = T::tensor({kColours, 1, 1, 1}, {kPixelMean[0], kPixelMean[1], kPixelMean[2]});
  const T::Tensor std = T::tensor({kColours, 1, 1, 1}, {kPixelStd[0], kPixelStd[1], kPixelStd[2]});
  return (T::lazy(frames) * T::lazy(std) + T::lazy(mean)).max(0.0).min(1.0).eval().unsqueeze(0);
}

}  // namespace gizml::diffusion
