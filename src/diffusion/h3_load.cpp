// MiniMax H3's transformer read from its checkpoint's own names (stable-diffusion.cpp's
// minimax_h3.hpp reads the same; diffusers' single-file converter maps them to its modules), the
// sizes from the shapes.
#include <string>

#include "h3_model.h"

namespace gizml::diffusion {

namespace {

using Weights = H3Model::Weights;

// A block linear as stored: INT8 codes kept (made an Int8Linear once the LoRAs are merged), any
// other dtype in F32.
Projection takeProjection(WeightFile& f, const std::string& name, int64_t in, int64_t out) {
  StoredWeight s = f.takeStored(name + ".weight", {out, in});
  if (!s.int8) s = StoredWeight{s.f32()};
  return {std::move(s), std::nullopt};
}

// The stored INT8 codes of the blocks' linears as Int8Linear, after the LoRAs.
void runCodesAsStored(std::vector<h3::Block>& blocks) {
  for (h3::Block& b : blocks)
    for (Projection* p : {&b.qkv, &b.out, &b.fc1, &b.fc2})
      if (p->w.int8) *p = Projection::of(std::move(p->w), true);
}

h3::Block takeBlock(WeightFile& f, const Weights& w, const std::string& name, int64_t timeWidth) {
  const int64_t d = w.hidden, inner = w.heads * w.headDim;
  h3::Block b;
  b.norm1 = f.take(name + ".norm1.weight", {d});
  b.norm2 = f.take(name + ".norm2.weight", {d});
  b.qkv = takeProjection(f, name + ".attn.qkv_proj", d, 3 * inner);
  b.out = takeProjection(f, name + ".attn.out_proj", inner, d);
  b.qNorm = f.take(name + ".attn.q_norm.weight", {w.headDim});
  b.kNorm = f.take(name + ".attn.k_norm.weight", {w.headDim});
  b.fc1 = takeProjection(f, name + ".mlp.fc1", d, 2 * w.ffn);
  b.fc2 = takeProjection(f, name + ".mlp.fc2", w.ffn, d);
  if (timeWidth > 0) b.adaln = takeLinear(f, name + ".adaln_proj.linear", timeWidth, 6 * h3::kModalities * d, true);
  return b;
}

std::vector<h3::Block> takeBlocks(WeightFile& f, const Weights& w, const std::string& prefix, int64_t timeWidth) {
  std::vector<h3::Block> blocks;
  for (int64_t i = 0; f.has(prefix + std::to_string(i) + ".attn.qkv_proj.weight"); ++i)
    blocks.push_back(takeBlock(f, w, prefix + std::to_string(i), timeWidth));
  if (blocks.empty()) f.shapeOf(prefix + "0.attn.qkv_proj.weight");  // names the missing tensor
  return blocks;
}

// The length of a 1-D tensor.
int64_t length(const WeightFile& f, const std::string& name) {
  const T::Shape s = f.shapeOf(name);
  if (s.size() != 1 || s[0] < 1) f.fail(name, "has shape " + T::shapeText(s) + ", expected [n]");
  return s[0];
}

// The second dimension of a 2-D weight (its input width).
int64_t inputs(const WeightFile& f, const std::string& name) {
  outputs(f, name);  // checks it is [out, in]
  return f.shapeOf(name)[1];
}

}  // namespace

H3Model H3Model::load(const std::string& path, const std::vector<H3Lora>& loras) {
  WeightFile f(path, "", "a MiniMax H3 transformer");
  // ComfyUI's single files (its BF16, pruned and INT8 ConvRot repacks) put every name under this.
  if (!f.has("video_patch_proj.weight") && f.has("model.diffusion_model.video_patch_proj.weight"))
    f.setPrefix("model.diffusion_model.");
  auto w = std::make_shared<Weights>();
  w->hidden = outputs(f, "video_patch_proj.weight");
  const int64_t patchDim = inputs(f, "video_patch_proj.weight");
  if (patchDim % 4 != 0)
    f.fail("video_patch_proj.weight", "has " + std::to_string(patchDim) +
                                          " inputs, expected channels x 4 (patches of 1 x 2 x 2)");
  w->videoChannels = patchDim / 4;
  w->audioChannels = inputs(f, "audio_patch_proj.weight");
  w->textDim = inputs(f, "condition_proj.weight");
  w->headDim = length(f, "blocks.0.attn.q_norm.weight");
  const int64_t qkvRows = outputs(f, "blocks.0.attn.qkv_proj.weight");
  if (qkvRows % (3 * w->headDim) != 0)
    f.fail("blocks.0.attn.qkv_proj.weight",
           "has " + std::to_string(qkvRows) + " rows, expected 3 x heads x " + std::to_string(w->headDim));
  w->heads = qkvRows / (3 * w->headDim);
  const int64_t fc1Rows = outputs(f, "blocks.0.mlp.fc1.weight");
  if (fc1Rows % 2 != 0) f.fail("blocks.0.mlp.fc1.weight", "has an odd row count, expected [gate; value]");
  w->ffn = fc1Rows / 2;

  int64_t timeWidth = 0;
  if (f.has("adaln_t_table")) {
    const T::Shape s = f.shapeOf("adaln_t_table");
    if (s.size() != 2 || s[0] < 2 || s[1] < 1)
      f.fail("adaln_t_table", "has shape " + T::shapeText(s) + ", expected [grid >= 2, time width]");
    timeWidth = s[1];
    w->adalnTable = f.take("adaln_t_table", s);
  } else {
    const int64_t mid = outputs(f, "time_embedder.proj_in.weight");
    w->freqDim = inputs(f, "time_embedder.proj_in.weight");
    if (w->freqDim % 2 != 0) f.fail("time_embedder.proj_in.weight", "has an odd input width, expected [cos, sin]");
    timeWidth = outputs(f, "time_embedder.proj_out.weight");
    w->timeIn = takeLinear(f, "time_embedder.proj_in", w->freqDim, mid, true);
    w->timeOut = takeLinear(f, "time_embedder.proj_out", mid, timeWidth, true);
  }
  const int64_t freqs = length(f, "rope.inv_freq");
  if (6 * freqs > w->headDim)
    f.fail("rope.inv_freq", "has " + std::to_string(freqs) + " frequencies: 6 x that exceeds the head dim " +
                                std::to_string(w->headDim));
  w->invFreq = f.take("rope.inv_freq", {freqs});

  w->videoIn = takeLinear(f, "video_patch_proj", patchDim, w->hidden, true);
  w->audioIn = takeLinear(f, "audio_patch_proj", w->audioChannels, w->hidden, true);
  w->textIn = takeLinear(f, "condition_proj", w->textDim, w->hidden, true);
  w->refiner = takeBlocks(f, *w, "token_refiner.blocks.", 0);
  w->refinerNorm = f.take("token_refiner.final_norm.weight", {w->hidden});
  w->blocks = takeBlocks(f, *w, "blocks.", timeWidth);
  w->finalNorm = f.take("final_layer.norm.weight", {w->hidden});
  w->finalAdaln = takeLinear(f, "final_layer.adaln_proj.linear", timeWidth, 2 * w->hidden, true);
  w->videoOut = takeLinear(f, "final_layer.video_out", w->hidden, patchDim, true);
  w->audioOut = takeLinear(f, "final_layer.audio_out", w->hidden, w->audioChannels, true);
  f.requireAllTaken();
  for (const H3Lora& l : loras) h3::mergeLora(*w, l);
  runCodesAsStored(w->blocks);
  runCodesAsStored(w->refiner);
  H3Model m;
  m.weights_ = std::move(w);
  return m;
}

// In h3, beside Block, for movedAll's lookup by argument.
namespace h3 {

static Block moved(const Block& b, const gizhw::gpu::Gpu& g) {
  Block m;
  m.norm1 = b.norm1.on(g);
  m.norm2 = b.norm2.on(g);
  m.qkv = b.qkv.to(g);
  m.out = b.out.to(g);
  m.qNorm = b.qNorm.on(g);
  m.kNorm = b.kNorm.on(g);
  m.fc1 = b.fc1.to(g);
  m.fc2 = b.fc2.to(g);
  if (b.adaln) m.adaln = moved(*b.adaln, g);
  return m;
}

}  // namespace h3

H3Model H3Model::to(const gizhw::gpu::Gpu& gpu) const {
  const Weights& w = *weights_;
  auto m = std::make_shared<Weights>(w);  // the sizes, and invFreq on the host (ropeOf reads it there)
  m->gpu = gpu;
  m->videoIn = moved(w.videoIn, gpu);
  m->audioIn = moved(w.audioIn, gpu);
  m->textIn = moved(w.textIn, gpu);
  if (w.timeIn) m->timeIn = moved(*w.timeIn, gpu);
  if (w.timeOut) m->timeOut = moved(*w.timeOut, gpu);
  if (w.adalnTable) m->adalnTable = w.adalnTable->on(gpu);
  m->refiner = movedAll(w.refiner, gpu);
  m->blocks = movedAll(w.blocks, gpu);
  m->refinerNorm = w.refinerNorm.on(gpu);
  m->finalNorm = w.finalNorm.on(gpu);
  m->finalAdaln = moved(w.finalAdaln, gpu);
  m->videoOut = moved(w.videoOut, gpu);
  m->audioOut = moved(w.audioOut, gpu);
  H3Model out;
  out.weights_ = std::move(m);
  if (tables_) {
    auto t = std::make_shared<Tables>(*tables_);
    for (h3::Mods& mods : t->steps) {
      for (auto& block : mods.blocks)
        for (T::Tensor& part : block) part = part.on(gpu);
      mods.finalShift = mods.finalShift.on(gpu);
      mods.finalScale = mods.finalScale.on(gpu);
    }
    out.tables_ = std::move(t);
  }
  return out;
}

int64_t H3Model::hidden() const { return weights_->hidden; }
int64_t H3Model::blocks() const { return static_cast<int64_t>(weights_->blocks.size()); }
int64_t H3Model::videoChannels() const { return weights_->videoChannels; }
int64_t H3Model::audioChannels() const { return weights_->audioChannels; }
int64_t H3Model::textDim() const { return weights_->textDim; }

}  // namespace gizml::diffusion
