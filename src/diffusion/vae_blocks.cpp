#include "vae_blocks.h"

#include <gizml/netops.h>

#include <cmath>
#include <cstring>
#include <utility>

namespace gizml::diffusion::vae {

namespace {

constexpr int64_t kGroups = 32;  // BFL's GroupNorm(num_groups=32)
constexpr double kEps = 1e-6;

bool startsWith(const std::string& s, const std::string& head) { return s.rfind(head, 0) == 0; }

void replaceOnce(std::string& s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  if (at != std::string::npos) s.replace(at, from.size(), to);
}

// "HEAD<i>.REST" with REST starting as one of parts' BFL names: diffusers' "NEWHEAD<index(i)>."
// followed by the part's diffusers name and the rest. False when name is not so.
bool renameLevel(std::string& name, const std::string& head, const std::string& newHead,
                 int64_t (*index)(int64_t, int64_t), int64_t levels, const std::vector<std::pair<std::string, std::string>>& parts) {
  if (!startsWith(name, head)) return false;
  size_t at = head.size();
  int64_t i = 0;
  while (at < name.size() && name[at] >= '0' && name[at] <= '9') i = i * 10 + (name[at++] - '0');
  if (at == head.size()) return false;
  for (const auto& [bfl, diffusers] : parts)
    if (name.compare(at, bfl.size(), bfl) == 0) {
      name = newHead + std::to_string(index(i, levels)) + diffusers + name.substr(at + bfl.size());
      return true;
    }
  return false;
}

// The name diffusers (scripts/convert_flux2_to_diffusers.py, single_file_utils' VAE conversion)
// gives BFL's tensor `name`, the decoder having `upLevels` levels (diffusers counts them from
// the deepest).
std::string diffusersName(std::string name, int64_t upLevels) {
  static const std::pair<const char*, const char*> kTop[] = {{"encoder.quant_conv.", "quant_conv."},
                                                           {"decoder.post_quant_conv.", "post_quant_conv."},
                                                           {"encoder.norm_out.", "encoder.conv_norm_out."},
                                                           {"decoder.norm_out.", "decoder.conv_norm_out."}};
  for (const auto& [bfl, diffusers] : kTop)
    if (startsWith(name, bfl)) return diffusers + name.substr(std::strlen(bfl));
  replaceOnce(name, ".mid.block_1.", ".mid_block.resnets.0.");
  replaceOnce(name, ".mid.block_2.", ".mid_block.resnets.1.");
  static const std::pair<const char*, const char*> kAttention[] = {
      {"norm.", "group_norm."}, {"q.", "to_q."}, {"k.", "to_k."}, {"v.", "to_v."}, {"proj_out.", "to_out.0."}};
  for (const auto& [bfl, diffusers] : kAttention)
    replaceOnce(name, std::string(".mid.attn_1.") + bfl, std::string(".mid_block.attentions.0.") + diffusers);
  const auto same = [](int64_t i, int64_t) { return i; };
  const auto reversed = [](int64_t i, int64_t levels) { return levels - 1 - i; };
  if (!renameLevel(name, "encoder.down.", "encoder.down_blocks.", same, upLevels,
                   {{".block.", ".resnets."}, {".downsample.", ".downsamplers.0."}}))
    renameLevel(name, "decoder.up.", "decoder.up_blocks.", reversed, upLevels,
                {{".block.", ".resnets."}, {".upsample.", ".upsamplers.0."}});
  replaceOnce(name, ".nin_shortcut.", ".conv_shortcut.");
  return name;
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

T::Tensor middle(const ResBlock& mid1, const Attention& attn, const ResBlock& mid2, const T::Tensor& x) {
  return resBlock(mid2, attention(attn, resBlock(mid1, x)));
}

// Nearest-neighbour x2: [c, h, w] to [c, 2h, 2w].
T::Tensor upsample2(const T::Tensor& x) {
  const int64_t c = x.size(0), h = x.size(1), w = x.size(2);
  return x.reshape({c, h, 1, w, 1}).expand({c, h, 2, w, 2}).contiguous().reshape({c, 2 * h, 2 * w});
}

// BFL's Downsample: zeros padded right and below, a 3 x 3 conv of stride 2. Its output (i, j)
// reads rows 2i .. 2i + 2, which is the pad-1 convolution's output at (2i + 1, 2j + 1): that
// convolution (lazyConv has no stride) at every pixel, every other row and column kept, so the
// three downsamplings do 4 times their products' work (about a fifth of the encoder's).
T::Tensor downsample2(const Conv& c, const T::Tensor& x) {
  const T::Tensor full = conv(c, x);
  return full.slice(1, 1, full.size(1), 2).slice(2, 1, full.size(2), 2).contiguous();
}

Norm moved(const Norm& n, const gizhw::gpu::Gpu& g) { return {n.w.on(g), n.b.on(g)}; }
ResBlock moved(const ResBlock& r, const gizhw::gpu::Gpu& g) {
  return {moved(r.norm1, g), moved(r.norm2, g), moved(r.conv1, g), moved(r.conv2, g),
          r.shortcut ? std::optional<Conv>(moved(*r.shortcut, g)) : std::nullopt};
}
Attention moved(const Attention& a, const gizhw::gpu::Gpu& g) {
  return {moved(a.norm, g), a.q.on(g),  a.k.on(g),  a.v.on(g),  a.proj.on(g),
          a.qb.on(g),       a.kb.on(g), a.vb.on(g), a.projb.on(g)};
}

}  // namespace

Reader::Reader(const std::string& path, const std::string& prefix, const std::string& model)
    : WeightFile(path, prefix, model) {
  // diffusers' names: the decoder's levels counted before any name is asked for.
  const auto inFile = [&](const std::string& full) { return full.substr(prefix.size()); };
  int64_t up = 0;
  while (has(inFile("decoder.up_blocks." + std::to_string(up) + ".resnets.0.conv1.weight"))) ++up;
  if (up > 0) renameWith([up](const std::string& name) { return diffusersName(name, up); });
}

Norm Reader::norm(const std::string& name, int64_t c) {
  if (c % kGroups != 0) fail(name + ".weight", "has " + std::to_string(c) + " channels, which 32 groups do not divide");
  return {take(name + ".weight", {c}), take(name + ".bias", {c})};
}

Conv Reader::conv(const std::string& name, int64_t c, int64_t o, int64_t k) {
  return {take(name + ".weight", {o, c, k, k}).reshape({o, c * k * k}), take(name + ".bias", {o}).reshape({o, 1}), k};
}

T::Tensor Reader::linear(const std::string& name, int64_t c) {
  if (shapeOf(name).size() == 2) return take(name, {c, c});
  return take(name, {c, c, 1, 1}).reshape({c, c});
}

ResBlock Reader::resBlock(const std::string& name, int64_t c, int64_t o) {
  ResBlock r{norm(name + ".norm1", c), norm(name + ".norm2", o), conv(name + ".conv1", c, o, 3),
             conv(name + ".conv2", o, o, 3), std::nullopt};
  if (c != o || has(name + ".nin_shortcut.weight")) r.shortcut = conv(name + ".nin_shortcut", c, o, 1);
  return r;
}

Attention Reader::attention(const std::string& name, int64_t c) {
  return {norm(name + ".norm", c),
          linear(name + ".q.weight", c),
          linear(name + ".k.weight", c),
          linear(name + ".v.weight", c),
          linear(name + ".proj_out.weight", c),
          take(name + ".q.bias", {c}),
          take(name + ".k.bias", {c}),
          take(name + ".v.bias", {c}),
          take(name + ".proj_out.bias", {c})};
}

int64_t Reader::outputs(const std::string& name) const {
  const T::Shape s = shapeOf(name);
  if (s.empty() || s[0] < 1) fail(name, "has shape " + T::shapeText(s) + ", expected [channels, ...]");
  return s[0];
}

int64_t Reader::inputs(const std::string& name) const {
  const T::Shape s = shapeOf(name);
  if (s.size() != 4 || s[1] < 1) fail(name, "has shape " + T::shapeText(s) + ", expected [o, c, k, k]");
  return s[1];
}

Decoder Reader::decoder(const std::string& base) {
  Decoder d;
  int64_t c = outputs(base + "conv_in.weight");
  d.convIn = conv(base + "conv_in", inputs(base + "conv_in.weight"), c, 3);
  d.mid1 = resBlock(base + "mid.block_1", c, c);
  d.attn = attention(base + "mid.attn_1", c);
  d.mid2 = resBlock(base + "mid.block_2", c, c);
  int64_t levels = 0;
  while (has(base + "up." + std::to_string(levels) + ".block.0.conv1.weight")) ++levels;
  if (levels == 0) outputs(base + "up.0.block.0.conv1.weight");  // names the missing tensor
  d.levels.resize(static_cast<size_t>(levels));
  // BFL's order: the deepest level first, each level's blocks changing c to its width.
  for (int64_t l = levels - 1; l >= 0; --l) {
    const std::string name = base + "up." + std::to_string(l);
    Decoder::Level& level = d.levels[static_cast<size_t>(l)];
    for (int64_t b = 0; has(name + ".block." + std::to_string(b) + ".conv1.weight"); ++b) {
      const std::string block = name + ".block." + std::to_string(b);
      const int64_t o = outputs(block + ".conv1.weight");
      level.blocks.push_back(resBlock(block, c, o));
      c = o;
    }
    if (l != 0) level.upsample = conv(name + ".upsample.conv", c, c, 3);
  }
  d.normOut = norm(base + "norm_out", c);
  d.convOut = conv(base + "conv_out", c, outputs(base + "conv_out.weight"), 3);
  return d;
}

Encoder Reader::encoder(const std::string& base) {
  Encoder e;
  int64_t c = outputs(base + "conv_in.weight");
  e.convIn = conv(base + "conv_in", inputs(base + "conv_in.weight"), c, 3);
  int64_t levels = 0;
  while (has(base + "down." + std::to_string(levels) + ".block.0.conv1.weight")) ++levels;
  if (levels == 0) outputs(base + "down.0.block.0.conv1.weight");  // names the missing tensor
  for (int64_t l = 0; l < levels; ++l) {
    const std::string name = base + "down." + std::to_string(l);
    Encoder::Level& level = e.levels.emplace_back();
    for (int64_t b = 0; has(name + ".block." + std::to_string(b) + ".conv1.weight"); ++b) {
      const std::string block = name + ".block." + std::to_string(b);
      const int64_t o = outputs(block + ".conv1.weight");
      level.blocks.push_back(resBlock(block, c, o));
      c = o;
    }
    if (l != levels - 1) level.downsample = conv(name + ".downsample.conv", c, c, 3);
  }
  e.mid1 = resBlock(base + "mid.block_1", c, c);
  e.attn = attention(base + "mid.attn_1", c);
  e.mid2 = resBlock(base + "mid.block_2", c, c);
  e.normOut = norm(base + "norm_out", c);
  e.convOut = conv(base + "conv_out", c, outputs(base + "conv_out.weight"), 3);
  return e;
}

T::Tensor conv(const Conv& c, const T::Tensor& x, const T::Tensor* residual) {
  const int64_t o = c.w.size(0), h = x.size(1), w = x.size(2);
  T::Lazy y = netops::lazyConv(c.w, x, c.k, c.k, c.k / 2, DType::F32) + T::lazy(c.b);
  if (residual != nullptr) y = y + T::lazy(residual->reshape({o, h * w}));
  return y.eval().reshape({o, h, w});
}

T::Tensor decode(const Decoder& d, const T::Tensor& z) {
  T::Tensor h = middle(d.mid1, d.attn, d.mid2, conv(d.convIn, z));
  for (auto level = d.levels.rbegin(); level != d.levels.rend(); ++level) {
    for (const ResBlock& b : level->blocks) h = resBlock(b, h);
    if (level->upsample) h = conv(*level->upsample, upsample2(h));
  }
  return conv(d.convOut, normSwish(d.normOut, h));
}

T::Tensor encode(const Encoder& e, const T::Tensor& x) {
  T::Tensor h = conv(e.convIn, x);
  for (const Encoder::Level& level : e.levels) {
    for (const ResBlock& b : level.blocks) h = resBlock(b, h);
    if (level.downsample) h = downsample2(*level.downsample, h);
  }
  return conv(e.convOut, normSwish(e.normOut, middle(e.mid1, e.attn, e.mid2, h)));
}

Conv moved(const Conv& c, const gizhw::gpu::Gpu& g) { return {c.w.on(g), c.b.on(g), c.k}; }

Decoder moved(const Decoder& d, const gizhw::gpu::Gpu& g) {
  Decoder m{moved(d.convIn, g), moved(d.mid1, g), moved(d.mid2, g), moved(d.attn, g), {}, moved(d.normOut, g),
            moved(d.convOut, g)};
  for (const Decoder::Level& l : d.levels) {
    Decoder::Level& level = m.levels.emplace_back();
    for (const ResBlock& b : l.blocks) level.blocks.push_back(moved(b, g));
    if (l.upsample) level.upsample = moved(*l.upsample, g);
  }
  return m;
}

Encoder moved(const Encoder& e, const gizhw::gpu::Gpu& g) {
  Encoder m{moved(e.convIn, g), {}, moved(e.mid1, g), moved(e.mid2, g), moved(e.attn, g), moved(e.normOut, g),
            moved(e.convOut, g)};
  for (const Encoder::Level& l : e.levels) {
    Encoder::Level& level = m.levels.emplace_back();
    for (const ResBlock& b : l.blocks) level.blocks.push_back(moved(b, g));
    if (l.downsample) level.downsample = moved(*l.downsample, g);
  }
  return m;
}

}  // namespace gizml::diffusion::vae
