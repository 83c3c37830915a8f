// The klein DiT's weights from a file in diffusers' names or BFL's (ComfyUI's single files): which
// of FLUX.2 [klein] and FLUX.3 it is, and which names, told by the single-stream modulation's
// name (as diffusers' single_file_utils tells them); the sizes from the shapes. The renames are
// diffusers' convert_flux2_transformer_checkpoint_to_diffusers and
// convert_flux3_transformer_checkpoint_to_diffusers read backwards.
#include <optional>
#include <string>

#include "klein_weights.h"
#include "weight_file.h"

namespace gizml::diffusion {

KleinRules kleinRules(KleinDit::Variant v) {
  // FLUX.2: pipeline_flux2_klein.py _prepare_latent_ids / _prepare_image_ids (scale 10);
  // FLUX.3: modular_pipelines/flux3/before_denoise.py _prepare_image_ids (image_rope_scale 0.5).
  if (v == KleinDit::Variant::Flux2) return {2000.0, 1.0, 10.0, 10.0, 0.0, 0.0};
  return {10000.0, 0.5, 0.0, 0.0, -1.0, -1.0};
}

namespace {

using Weights = KleinDit::Weights;
using Variant = KleinDit::Variant;

// A stream's tensor names: qkv fused, or q, k, v apart (qkv empty).
struct StreamNames {
  std::string qkv, q, k, v, qNorm, kNorm, out, mlpIn, mlpOut;
};

// FLUX.2 double block n's image or text stream.
StreamNames flux2Stream(bool bfl, int64_t n, bool text) {
  if (bfl) {
    const std::string p = "double_blocks." + std::to_string(n) + (text ? ".txt_" : ".img_");
    return {p + "attn.qkv.weight", "", "", "", p + "attn.norm.query_norm.scale", p + "attn.norm.key_norm.scale",
            p + "attn.proj.weight", p + "mlp.0.weight", p + "mlp.2.weight"};
  }
  const std::string p = "transformer_blocks." + std::to_string(n) + ".";
  if (text)
    return {"", p + "attn.add_q_proj.weight", p + "attn.add_k_proj.weight", p + "attn.add_v_proj.weight",
            p + "attn.norm_added_q.weight", p + "attn.norm_added_k.weight", p + "attn.to_add_out.weight",
            p + "ff_context.linear_in.weight", p + "ff_context.linear_out.weight"};
  return {"", p + "attn.to_q.weight", p + "attn.to_k.weight", p + "attn.to_v.weight", p + "attn.norm_q.weight",
          p + "attn.norm_k.weight", p + "attn.to_out.0.weight", p + "ff.linear_in.weight", p + "ff.linear_out.weight"};
}

// A FLUX.3 block (per-mode or joint) under its prefix.
StreamNames flux3Stream(bool bfl, const std::string& p) {
  if (bfl)
    return {"", p + "q_proj.weight", p + "k_proj.weight", p + "v_proj.weight", p + "norm.query_norm.scale",
            p + "norm.key_norm.scale", p + "attn_out.weight", p + "mlp_in.weight", p + "mlp_out.weight"};
  return {"", p + "attn.to_q.weight", p + "attn.to_k.weight", p + "attn.to_v.weight", p + "attn.norm_q.weight",
          p + "attn.norm_k.weight", p + "attn.to_out.0.weight", p + "ff.linear_in.weight", p + "ff.linear_out.weight"};
}

// FLUX.3's block prefixes: per-mode blocks of mode m, or the joint blocks (mode < 0).
std::string flux3Prefix(bool bfl, int mode, int64_t n) {
  static const char* kModes[] = {"image", "image_cond"};
  const std::string i = std::to_string(n) + ".";
  if (mode < 0) return (bfl ? "single_blocks." : "single_transformer_blocks.") + i;
  if (mode == kText) return "txt_mode_blocks." + i;
  return std::string(bfl ? "content_mode_blocks." : "mode_blocks.") + kModes[mode] + "." + i;
}

std::string flux3ModeName(int mode) { return mode == kImage ? "image" : mode == kCond ? "image_cond" : "txt"; }

// The first dimension of a 2-D weight (its output width).
int64_t rows(const WeightFile& f, const std::string& name) {
  const T::Shape s = f.shapeOf(name);
  if (s.size() != 2 || s[0] < 1 || s[1] < 1) f.fail(name, "has shape " + T::shapeText(s) + ", expected [out, in]");
  return s[0];
}

int64_t columns(const WeightFile& f, const std::string& name) {
  rows(f, name);
  return f.shapeOf(name)[1];
}

class Loader {
 public:
  Loader(WeightFile& f, Weights& w, bool bfl, bool int8) : f_(f), w_(w), bfl_(bfl), int8_(int8) {}

  Projection plain(const std::string& name, int64_t out, int64_t in) {
    return Projection::of(f_.take(name, {out, in}), false);
  }
  // A block's linear: INT8 codes stored in the file are taken as they are for INT8 linears.
  Projection block(const std::string& name, int64_t out, int64_t in) {
    return Projection::of(f_.takeStored(name, {out, in}), int8_);
  }

  KleinStream stream(const StreamNames& n) {
    const int64_t d = w_.dim;
    KleinStream s;
    if (n.qkv.empty())
      s.qkv = Projection::of(T::concat({f_.take(n.q, {d, d}), f_.take(n.k, {d, d}), f_.take(n.v, {d, d})}, 0), int8_);
    else
      s.qkv = block(n.qkv, 3 * d, d);
    s.qNorm = f_.take(n.qNorm, {w_.headDim});
    s.kNorm = f_.take(n.kNorm, {w_.headDim});
    s.out = block(n.out, d, d);
    s.mlpIn = block(n.mlpIn, 2 * w_.mlp, d);
    s.mlpOut = block(n.mlpOut, d, w_.mlp);
    return s;
  }

  // The final modulation in BFL's order (shift, scale); diffusers stores (scale, shift).
  Projection finalModulation(const std::string& name) {
    const int64_t d = w_.dim;
    T::Tensor m = f_.take(name, {2 * d, d});
    if (!bfl_) m = T::concat({m.slice(0, d, 2 * d), m.slice(0, 0, d)}, 0).contiguous();
    return Projection::of(m, false);
  }

  // The sizes from the first block (its q norm and MLP) and the embedders.
  void sizes(const StreamNames& first, const std::string& xEmbed, const std::string& txtIn) {
    w_.dim = rows(f_, xEmbed);
    w_.channels = columns(f_, xEmbed);
    w_.textDim = columns(f_, txtIn);
    const T::Shape qn = f_.shapeOf(first.qNorm);
    if (qn.size() != 1 || qn[0] < 1 || w_.dim % qn[0] != 0)
      f_.fail(first.qNorm,
              "has shape " + T::shapeText(qn) + ", expected [head dim] dividing " + std::to_string(w_.dim));
    w_.headDim = qn[0];
    const int64_t m2 = rows(f_, first.mlpIn);
    if (m2 % 2 != 0) f_.fail(first.mlpIn, "has " + std::to_string(m2) + " rows, expected 2 x the MLP width");
    w_.mlp = m2 / 2;
  }

  void rope(const KleinConfig& c, const std::string& qNorm) {
    std::vector<int64_t> axes = c.ropeAxes;
    if (axes.empty()) axes.assign(4, w_.headDim / 4);
    int64_t sum = 0;
    bool even = axes.size() == 4;
    for (int64_t a : axes) {
      sum += a;
      even = even && a > 0 && a % 2 == 0;
    }
    if (sum != w_.headDim || !even)
      f_.fail(qNorm, "gives head dim " + std::to_string(w_.headDim) + ", not the sum of 4 even RoPE axes " +
                         std::to_string(sum));
    w_.ropeAxes = axes;
    w_.ropeTheta = c.ropeTheta > 0 ? c.ropeTheta : kleinRules(w_.variant).theta;
  }

 private:
  WeightFile& f_;
  Weights& w_;
  bool bfl_, int8_;
};

void loadFlux2(WeightFile& f, Weights& w, bool bfl, const KleinConfig& c) {
  Loader l(f, w, bfl, c.linears == ZImageConfig::Linears::Int8);
  const StreamNames first = flux2Stream(bfl, 0, false);
  l.sizes(first, bfl ? "img_in.weight" : "x_embedder.weight", bfl ? "txt_in.weight" : "context_embedder.weight");
  l.rope(c, first.qNorm);
  const int64_t d = w.dim;
  w.condChannels = w.channels;
  const std::string lin = bfl ? ".lin.weight" : ".linear.weight";
  const std::string t1 = bfl ? "time_in.in_layer.weight" : "time_guidance_embed.timestep_embedder.linear_1.weight";
  w.timeIn1 = l.plain(t1, d, columns(f, t1));
  w.timeIn2 = l.plain(bfl ? "time_in.out_layer.weight" : "time_guidance_embed.timestep_embedder.linear_2.weight", d, d);
  w.xEmbed = l.plain(bfl ? "img_in.weight" : "x_embedder.weight", d, w.channels);
  w.txtIn = l.plain(bfl ? "txt_in.weight" : "context_embedder.weight", d, w.textDim);
  w.modImg = l.plain("double_stream_modulation_img" + lin, 6 * d, d);
  w.modTxt = l.plain("double_stream_modulation_txt" + lin, 6 * d, d);
  w.modSingle = l.plain("single_stream_modulation" + lin, 3 * d, d);
  for (int64_t n = 0; f.has(bfl ? flux2Stream(bfl, n, false).qkv : flux2Stream(bfl, n, false).q); ++n)
    w.doubles.push_back({l.stream(flux2Stream(bfl, n, false)), l.stream(flux2Stream(bfl, n, true))});
  for (int64_t n = 0;; ++n) {
    const std::string p = (bfl ? "single_blocks." : "single_transformer_blocks.") + std::to_string(n) + ".";
    const std::string in = p + (bfl ? "linear1.weight" : "attn.to_qkv_mlp_proj.weight");
    if (!f.has(in)) break;
    KleinFused s;
    s.in = l.block(in, 3 * d + 2 * w.mlp, d);
    s.out = l.block(p + (bfl ? "linear2.weight" : "attn.to_out.weight"), d, d + w.mlp);
    s.qNorm = f.take(p + (bfl ? "norm.query_norm.scale" : "attn.norm_q.weight"), {w.headDim});
    s.kNorm = f.take(p + (bfl ? "norm.key_norm.scale" : "attn.norm_k.weight"), {w.headDim});
    w.singles.push_back(std::move(s));
  }
  w.finalMod = l.finalModulation(bfl ? "final_layer.adaLN_modulation.1.weight" : "norm_out.linear.weight");
  w.projOut = l.plain(bfl ? "final_layer.linear.weight" : "proj_out.weight", w.channels, d);
}

void loadFlux3(WeightFile& f, Weights& w, bool bfl, const KleinConfig& c) {
  Loader l(f, w, bfl, c.linears == ZImageConfig::Linears::Int8);
  const StreamNames first = flux3Stream(bfl, flux3Prefix(bfl, kText, 0));
  const std::string xName = bfl ? "emb_in.image.weight" : "x_embedders.image.weight";
  const std::string condName = bfl ? "emb_in.image_cond.weight" : "x_embedders.image_cond.weight";
  l.sizes(first, xName, bfl ? "txt_in.weight" : "context_embedder.weight");
  l.rope(c, first.qNorm);
  const int64_t d = w.dim;
  w.condChannels = columns(f, condName);
  const std::string t1 = bfl ? "time_in.in_layer.weight" : "timestep_embedder.linear_1.weight";
  w.timeIn1 = l.plain(t1, d, columns(f, t1));
  w.timeIn2 = l.plain(bfl ? "time_in.out_layer.weight" : "timestep_embedder.linear_2.weight", d, d);
  const std::string r1 = bfl ? "ref_time_in.in_layer.weight" : "target_timestep_embedder.linear_1.weight";
  if (f.has(r1)) {
    w.targetIn1 = l.plain(r1, d, columns(f, t1));
    w.targetIn2 = l.plain(bfl ? "ref_time_in.out_layer.weight" : "target_timestep_embedder.linear_2.weight", d, d);
  }
  w.xEmbed = l.plain(xName, d, w.channels);
  w.condEmbed = l.plain(condName, d, w.condChannels);
  w.txtIn = l.plain(bfl ? "txt_in.weight" : "context_embedder.weight", d, w.textDim);
  const std::string lin = bfl ? ".lin.weight" : ".linear.weight";
  w.modeBlocks.resize(3);
  for (int mode : {kImage, kCond, kText}) {
    w.earlyMod.push_back(l.plain("early_stream_modulations." + flux3ModeName(mode) + lin, 3 * d, d));
    w.singleMod.push_back(l.plain("single_stream_modulations." + flux3ModeName(mode) + lin, 3 * d, d));
    for (int64_t n = 0; f.has(flux3Stream(bfl, flux3Prefix(bfl, mode, n)).q); ++n)
      w.modeBlocks[static_cast<size_t>(mode)].push_back(l.stream(flux3Stream(bfl, flux3Prefix(bfl, mode, n))));
  }
  for (int64_t n = 0; f.has(flux3Stream(bfl, flux3Prefix(bfl, -1, n)).q); ++n)
    w.joint.push_back(l.stream(flux3Stream(bfl, flux3Prefix(bfl, -1, n))));
  w.finalMod = l.finalModulation(bfl ? "final_layer.image.adaLN_modulation.1.weight" : "norm_out.linear.weight");
  w.projOut = l.plain(bfl ? "final_layer.image.linear.weight" : "proj_out.weight", w.channels, d);
}

}  // namespace

namespace {

// The single-stream modulation's name tells the variant and the names, with or without
// ComfyUI's prefix (which this leaves set on f).
struct Kind {
  const char* name;
  Variant variant;
  bool bfl;
};

const Kind* kindOf(WeightFile& f) {
  static const Kind kKinds[] = {{"single_stream_modulation.lin.weight", Variant::Flux2, true},
                                {"single_stream_modulation.linear.weight", Variant::Flux2, false},
                                {"single_stream_modulations.image.lin.weight", Variant::Flux3, true},
                                {"single_stream_modulations.image.linear.weight", Variant::Flux3, false}};
  for (const char* prefix : {"", "model.diffusion_model."}) {
    f.setPrefix(prefix);
    for (const Kind& k : kKinds)
      if (f.has(k.name)) return &k;
  }
  return nullptr;
}

}  // namespace

std::optional<KleinDit::Variant> KleinDit::variantOf(const std::string& path) {
  WeightFile f(path, "", "a diffusion model");
  const Kind* kind = kindOf(f);
  if (!kind) return std::nullopt;
  return kind->variant;
}

KleinDit KleinDit::load(const std::string& path, const KleinConfig& config) {
  WeightFile f(path, "", "a FLUX.2 [klein] or FLUX.3 DiT");
  const Kind* kind = kindOf(f);
  if (!kind)
    throw Error(path + ": no tensor single_stream_modulation.lin.weight (BFL's FLUX.2), "
                       "single_stream_modulation.linear.weight (diffusers' FLUX.2) or their FLUX.3 "
                       "single_stream_modulations.image.* (not a FLUX.2 [klein] or FLUX.3 DiT?)");
  auto w = std::make_shared<Weights>();
  w->variant = kind->variant;
  if (kind->variant == Variant::Flux2)
    loadFlux2(f, *w, kind->bfl, config);
  else
    loadFlux3(f, *w, kind->bfl, config);
  f.requireAllTaken();
  KleinDit dit;
  dit.weights_ = std::move(w);
  return dit;
}

KleinDit::Variant KleinDit::variant() const { return weights_->variant; }
bool KleinDit::flowMap() const { return weights_->targetIn1.has_value(); }
int64_t KleinDit::channels() const { return weights_->channels; }
int64_t KleinDit::referenceChannels() const { return weights_->condChannels; }
int64_t KleinDit::textDim() const { return weights_->textDim; }
int64_t KleinDit::dim() const { return weights_->dim; }

}  // namespace gizml::diffusion
