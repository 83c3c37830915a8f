// LoRAs merged into MiniMax H3's linears as it loads, read on the checkpoint's own module names as
// their trainers write them (diffusers' _convert_non_diffusers_minimax_h3_lora_to_diffusers reads
// the same): W += scale (alpha / rank) up down, in F32.
#include <gizml/error.h>
#include <gizml/safetensors.h>

#include <map>
#include <string>

#include "h3_model.h"

namespace gizml::diffusion {

namespace {

using Weights = H3Model::Weights;

// A linear a LoRA may adapt: a plain one, or a block's (which may still hold INT8 codes).
struct Target {
  Linear* linear = nullptr;
  Projection* projection = nullptr;

  T::Tensor f32() const { return linear ? linear->w : projection->w.f32(); }
  void set(T::Tensor w) const {
    if (linear) linear->w = std::move(w);
    else projection->w = StoredWeight{std::move(w)};
  }
};

// Every linear a LoRA may adapt, by its checkpoint name.
std::map<std::string, Target> linears(Weights& w) {
  std::map<std::string, Target> m = {{"video_patch_proj", {&w.videoIn}},
                                     {"audio_patch_proj", {&w.audioIn}},
                                     {"condition_proj", {&w.textIn}},
                                     {"final_layer.adaln_proj.linear", {&w.finalAdaln}},
                                     {"final_layer.video_out", {&w.videoOut}},
                                     {"final_layer.audio_out", {&w.audioOut}}};
  if (w.timeIn) m["time_embedder.proj_in"] = {&*w.timeIn};
  if (w.timeOut) m["time_embedder.proj_out"] = {&*w.timeOut};
  const auto add = [&](std::vector<h3::Block>& blocks, const std::string& prefix) {
    for (size_t i = 0; i < blocks.size(); ++i) {
      const std::string p = prefix + std::to_string(i) + ".";
      h3::Block& b = blocks[i];
      m[p + "attn.qkv_proj"] = {nullptr, &b.qkv};
      m[p + "attn.out_proj"] = {nullptr, &b.out};
      m[p + "mlp.fc1"] = {nullptr, &b.fc1};
      m[p + "mlp.fc2"] = {nullptr, &b.fc2};
      if (b.adaln) m[p + "adaln_proj.linear"] = {&*b.adaln};
    }
  };
  add(w.blocks, "blocks.");
  add(w.refiner, "token_refiner.blocks.");
  return m;
}

struct Pair {
  T::Tensor down, up;  // [rank, in], [out, rank]
  std::string downName, upName;
  double alpha = 0;  // 0: none stored, the factor is 1
};

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void h3::mergeLora(Weights& w, const H3Lora& lora) {
  const std::map<std::string, T::Tensor> all = llm::loadSafetensors(lora.path);
  const auto fail = [&](const std::string& name, const std::string& what) {
    throw Error(lora.path + ": tensor " + name + " " + what);
  };
  std::map<std::string, Pair> pairs;
  for (const auto& [name, t] : all) {
    const std::string key = name.rfind("diffusion_model.", 0) == 0 ? name.substr(16) : name;
    if (!isFloat(t.dtype())) fail(name, std::string("is ") + dtypeName(t.dtype()) + ", expected a float dtype");
    bool matched = false;
    for (const char* suffix : {".lora_down.weight", ".lora_A.weight", ".lora_up.weight", ".lora_B.weight", ".alpha"}) {
      if (!endsWith(key, suffix)) continue;
      Pair& p = pairs[key.substr(0, key.size() - std::string(suffix).size())];
      const std::string s = suffix;
      if (s == ".alpha") {
        if (t.numel() != 1) fail(name, "has shape " + T::shapeText(t.shape()) + ", expected one value");
        p.alpha = t.item();
      } else if (s == ".lora_down.weight" || s == ".lora_A.weight") {
        p.down = t.cast(DType::F32).contiguous();
        p.downName = name;
      } else {
        p.up = t.cast(DType::F32).contiguous();
        p.upName = name;
      }
      matched = true;
      break;
    }
    if (!matched) fail(name, "is not a LoRA's (lora_down / lora_up / alpha, or lora_A / lora_B)");
  }
  std::map<std::string, Target> targets = linears(w);
  for (const auto& [module, p] : pairs) {
    const std::string some = p.downName.empty() ? p.upName : p.downName;
    const auto it = targets.find(module);
    if (it == targets.end()) fail(some, "adapts " + module + ", which is not a linear of this MiniMax H3 transformer");
    if (p.downName.empty() || p.upName.empty())
      fail(some, "has no " + std::string(p.downName.empty() ? "down (A)" : "up (B)") + " matrix beside it");
    const T::Tensor weight = it->second.f32();
    const int64_t out = weight.size(0), in = weight.size(1);
    if (p.down.ndim() != 2 || p.down.size(1) != in || p.down.size(0) < 1)
      fail(p.downName, "has shape " + T::shapeText(p.down.shape()) + ", expected [rank, " + std::to_string(in) + "]");
    const int64_t rank = p.down.size(0);
    if (p.up.shape() != T::Shape{out, rank})
      fail(p.upName, "has shape " + T::shapeText(p.up.shape()) + ", expected [" + std::to_string(out) + ", " +
                         std::to_string(rank) + "]");
    const double factor = lora.scale * (p.alpha != 0 ? p.alpha / static_cast<double>(rank) : 1.0);
    it->second.set((T::lazy(weight) + T::Lazy(factor) * T::lazy(T::matmul(p.up, p.down))).eval());
  }
}

}  // namespace gizml::diffusion
