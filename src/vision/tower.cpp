// The vision tower of Qwen3.5 (vision.h's Tower), step for step as transformers'
// Qwen3_5VisionModel: its positions and angles (transformers/vision_utils.py's
// get_vision_interpolation_indices_and_weights and get_vision_position_ids) in float32 as torch
// computes them, the rest on tensor and netops operations.
#include <gizml/error.h>
#include <gizml/netops.h>
#include <gizml/vision.h>

#include <cmath>
#include <filesystem>

#include "llm/formats/safetensors_checkpoint.h"
#include "llm/json_fields.h"

namespace gizml::vision {
namespace {

namespace fs = std::filesystem;
using llm::JsonFields;

int64_t positive(const JsonFields& f, const std::string& key, int64_t fallback = 0) {
  const int64_t v = fallback > 0 ? f.getInt(key, fallback) : f.getInt(key);
  if (v < 1 || v > (int64_t{1} << 24)) throw Error(f.where(key) + " is " + std::to_string(v) + ": expected a size of at least 1");
  return v;
}

// The preprocessor's fields, where the folder has its preprocessor_config.json; the patch sizes
// must be the tower's.
void readPreprocessor(const std::string& path, PatchConfig& p) {
  const JsonFields f = JsonFields::read(path);
  for (const auto& [key, value] : {std::pair<const char*, int64_t>{"patch_size", p.patchSize},
                                   {"temporal_patch_size", p.temporalPatchSize}, {"merge_size", p.mergeSize}})
    if (f.has(key) && f.getInt(key) != value)
      throw Error(f.where(key) + " is " + std::to_string(f.getInt(key)) + ", the tower's config.json says " +
                  std::to_string(value));
  if (f.hasObject("size")) {
    p.minPixels = positive(f.child("size"), "shortest_edge", p.minPixels);
    p.maxPixels = positive(f.child("size"), "longest_edge", p.maxPixels);
  }
  p.minPixels = positive(f, "min_pixels", p.minPixels);
  p.maxPixels = positive(f, "max_pixels", p.maxPixels);
  for (const auto& [key, values] : {std::pair<const char*, std::array<float, 3>*>{"image_mean", &p.mean},
                                    {"image_std", &p.std}}) {
    if (!f.has(key)) continue;
    const nlohmann::json& a = f.json()[key];
    if (!a.is_array() || a.size() != 3) throw Error(f.where(key) + ": expected 3 numbers");
    for (size_t i = 0; i < 3; ++i) {
      if (!a[i].is_number()) throw Error(f.where(key) + ": expected 3 numbers");
      (*values)[i] = a[i].get<float>();
    }
  }
}

TowerConfig readConfig(const std::string& folder) {
  const JsonFields top = JsonFields::read((fs::path(folder) / "config.json").string());
  if (!top.hasObject("vision_config"))
    throw Error(top.where("vision_config") + " is missing: not a multimodal model with a vision tower");
  const JsonFields v = top.child("vision_config");
  TowerConfig c;
  c.depth = positive(v, "depth");
  c.hidden = positive(v, "hidden_size");
  c.intermediate = positive(v, "intermediate_size");
  c.heads = positive(v, "num_heads");
  c.outHidden = positive(v, "out_hidden_size");
  c.positions = positive(v, "num_position_embeddings");
  c.patches.patchSize = positive(v, "patch_size", 16);
  c.patches.temporalPatchSize = positive(v, "temporal_patch_size", 2);
  c.patches.mergeSize = positive(v, "spatial_merge_size", 2);
  if (positive(v, "in_channels", 3) != 3) throw Error(v.where("in_channels") + ": expected 3 (RGB)");
  const std::string act = v.getString("hidden_act", "gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh" && act != "gelu")
    throw Error(v.where("hidden_act") + " is \"" + act + "\": expected gelu_pytorch_tanh or gelu");
  c.tanhGelu = act == "gelu_pytorch_tanh";
  if (v.hasObject("rope_parameters")) c.ropeTheta = v.child("rope_parameters").getFloat("rope_theta", c.ropeTheta);
  if (v.isArray("deepstack_visual_indexes")) c.deepstack = v.getInts("deepstack_visual_indexes");
  for (int64_t block : c.deepstack)
    if (block < 0 || block >= c.depth)
      throw Error(v.where("deepstack_visual_indexes") + ": block " + std::to_string(block) + " is not one of the " +
                  std::to_string(c.depth) + " blocks");
  const auto side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(c.positions))));
  if (side * side != c.positions || side < 2)
    throw Error(v.where("num_position_embeddings") + " is " + std::to_string(c.positions) +
                ": expected a square grid of at least 2 x 2");
  if (c.hidden % c.heads != 0 || (c.hidden / c.heads) % 4 != 0)
    throw Error(v.where("num_heads") + ": hidden_size " + std::to_string(c.hidden) + " over " +
                std::to_string(c.heads) + " heads must give heads of a multiple of 4 (a 2-D rotary embedding)");
  const fs::path preprocessor = fs::path(folder) / "preprocessor_config.json";
  if (fs::exists(preprocessor)) readPreprocessor(preprocessor.string(), c.patches);
  return c;
}

// Tensors under the tower's prefix, each checked against its expected shape.
class Reader {
 public:
  explicit Reader(const std::string& folder) : folder_(folder), checkpoint_(folder) {
    for (const char* p : {"model.visual.", "visual."})
      if (checkpoint_.has(std::string(p) + "pos_embed.weight")) prefix_ = p;
    if (prefix_.empty()) throw Error(folder + ": no vision tower (model.visual.pos_embed.weight) in its checkpoint");
  }
  tensor::Tensor take(const std::string& name, const tensor::Shape& shape) const {
    const std::string full = prefix_ + name;
    if (!checkpoint_.has(full)) throw Error(folder_ + ": the vision tower's " + full + " is missing");
    const tensor::Shape& stored = checkpoint_.tensor(full).shape;
    int64_t count = 1;
    for (int64_t s : shape) count *= s;
    int64_t storedCount = 1;
    for (int64_t s : stored) storedCount *= s;
    // The patch embedding is a Conv3d weight [hidden, 3, T, P, P], read as a linear's [hidden, 3 T P P].
    if (storedCount != count || stored.empty() || stored[0] != shape[0])
      throw Error(folder_ + ": " + full + " has shape " + tensor::shapeText(stored) + ", expected " +
                  tensor::shapeText(shape));
    return checkpoint_.load(full).cast(DType::F32).reshape(shape).contiguous();
  }

 private:
  std::string folder_;
  llm::SafetensorsCheckpoint checkpoint_;
  std::string prefix_;
};

// Each patch's (row, column) in the picture's grid, in the order of blocks of merge x merge
// patches (get_vision_position_ids), frame after frame.
std::vector<std::pair<int64_t, int64_t>> patchCoordinates(const Grid& g, int64_t merge) {
  std::vector<std::pair<int64_t, int64_t>> rc;
  rc.reserve(static_cast<size_t>(g.patches()));
  for (int64_t t = 0; t < g.t; ++t)
    for (int64_t br = 0; br < g.h / merge; ++br)
      for (int64_t bc = 0; bc < g.w / merge; ++bc)
        for (int64_t r = 0; r < merge; ++r)
          for (int64_t c = 0; c < merge; ++c) rc.emplace_back(br * merge + r, bc * merge + c);
  return rc;
}

// The learned positions resampled to the grid: F.interpolate(bilinear, align_corners=True) of
// the side x side table, as 4 weighted rows a patch, each weight and sum in float32.
tensor::Tensor interpolatedPositions(const float* table, int64_t side, int64_t hidden, const Grid& g,
                                     const std::vector<std::pair<int64_t, int64_t>>& coordinates) {
  struct Taps {
    int64_t at[2];
    float weight[2];
  };
  const auto taps = [side](int64_t index, int64_t size) {
    const float src = static_cast<float>(index) * static_cast<float>(side - 1) /
                      static_cast<float>(std::max<int64_t>(size - 1, 1));
    const float floor = std::floor(src);
    Taps t{};
    for (int k = 0; k < 2; ++k) {
      t.at[k] = std::clamp<int64_t>(static_cast<int64_t>(floor) + k, 0, side - 1);
      t.weight[k] = std::max(0.0f, 1.0f - std::fabs(src - floor - static_cast<float>(k)));
    }
    return t;
  };
  tensor::Tensor out = tensor::empty({static_cast<int64_t>(coordinates.size()), hidden});
  float* o = out.data<float>();
  for (const auto& [row, col] : coordinates) {
    const Taps h = taps(row, g.h), w = taps(col, g.w);
    for (int64_t d = 0; d < hidden; ++d) {
      float sum = 0.0f;
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
          sum += table[(h.at[i] * side + w.at[j]) * hidden + d] * (h.weight[i] * w.weight[j]);
      *o++ = sum;
    }
  }
  return out;
}

// The 2-D rotary angles of each patch, [patches, 1, head / 2] cos and sin: a quarter of the
// head's pairs turn with the row, a quarter with the column, and the same again (the rotate-half
// form's halves).
std::pair<tensor::Tensor, tensor::Tensor> rotaryTables(const std::vector<std::pair<int64_t, int64_t>>& coordinates,
                                                       int64_t head, double theta) {
  const int64_t quarter = head / 4, spatial = head / 2;
  std::vector<float> invFreq(static_cast<size_t>(quarter));
  for (int64_t j = 0; j < quarter; ++j)
    invFreq[static_cast<size_t>(j)] =
        static_cast<float>(1.0 / std::pow(theta, static_cast<double>(2 * j) / static_cast<double>(spatial)));
  const auto n = static_cast<int64_t>(coordinates.size());
  tensor::Tensor cos = tensor::empty({n, 1, spatial}), sin = tensor::empty({n, 1, spatial});
  float* c = cos.data<float>();
  float* s = sin.data<float>();
  for (const auto& [row, col] : coordinates)
    for (int64_t axis = 0; axis < 2; ++axis)
      for (int64_t j = 0; j < quarter; ++j) {
        const float angle = static_cast<float>(axis == 0 ? row : col) * invFreq[static_cast<size_t>(j)];
        *c++ = std::cos(angle);
        *s++ = std::sin(angle);
      }
  return {cos, sin};
}

// x [rows, heads, head] rotated: (x1 cos - x2 sin, x2 cos + x1 sin) over its halves.
tensor::Tensor rotated(const tensor::Tensor& x, const tensor::Tensor& cos, const tensor::Tensor& sin) {
  const int64_t half = x.size(2) / 2;
  const tensor::Lazy x1 = tensor::lazy(x.slice(2, 0, half)), x2 = tensor::lazy(x.slice(2, half, 2 * half));
  const tensor::Lazy c = tensor::lazy(cos), s = tensor::lazy(sin);
  return tensor::concat({(x1 * c - x2 * s).eval(), (x2 * c + x1 * s).eval()}, 2);
}

}  // namespace

Tower Tower::load(const std::string& folder) {
  Tower t;
  t.config_ = readConfig(folder);
  const TowerConfig& c = t.config_;
  const Reader r(folder);
  const PatchConfig& p = c.patches;
  const int64_t patchWidth = 3 * p.temporalPatchSize * p.patchSize * p.patchSize;
  const int64_t merged = c.hidden * p.mergeSize * p.mergeSize;
  t.patchW_ = r.take("patch_embed.proj.weight", {c.hidden, patchWidth});
  t.patchB_ = r.take("patch_embed.proj.bias", {c.hidden});
  t.positions_ = r.take("pos_embed.weight", {c.positions, c.hidden});
  for (int64_t i = 0; i < c.depth; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    t.blocks_.push_back({r.take(b + "norm1.weight", {c.hidden}), r.take(b + "norm1.bias", {c.hidden}),
                         r.take(b + "norm2.weight", {c.hidden}), r.take(b + "norm2.bias", {c.hidden}),
                         r.take(b + "attn.qkv.weight", {3 * c.hidden, c.hidden}),
                         r.take(b + "attn.qkv.bias", {3 * c.hidden}),
                         r.take(b + "attn.proj.weight", {c.hidden, c.hidden}), r.take(b + "attn.proj.bias", {c.hidden}),
                         r.take(b + "mlp.linear_fc1.weight", {c.intermediate, c.hidden}),
                         r.take(b + "mlp.linear_fc1.bias", {c.intermediate}),
                         r.take(b + "mlp.linear_fc2.weight", {c.hidden, c.intermediate}),
                         r.take(b + "mlp.linear_fc2.bias", {c.hidden})});
  }
  const auto merger = [&](const std::string& name, bool normAfterMerge) {
    const int64_t normed = normAfterMerge ? merged : c.hidden;
    return Merger{r.take(name + "norm.weight", {normed}), r.take(name + "norm.bias", {normed}),
                  r.take(name + "linear_fc1.weight", {merged, merged}), r.take(name + "linear_fc1.bias", {merged}),
                  r.take(name + "linear_fc2.weight", {c.outHidden, merged}),
                  r.take(name + "linear_fc2.bias", {c.outHidden}), normAfterMerge};
  };
  t.merger_ = merger("merger.", false);
  for (size_t i = 0; i < c.deepstack.size(); ++i)
    t.deepstackMergers_.push_back(merger("deepstack_merger_list." + std::to_string(i) + ".", true));
  return t;
}

tensor::Tensor Tower::merged(const Merger& m, const tensor::Tensor& x) const {
  const int64_t group = config_.patches.mergeSize * config_.patches.mergeSize;
  const auto rows = [&](const tensor::Tensor& t) { return t.reshape({x.size(0) / group, config_.hidden * group}); };
  const tensor::Tensor normed = m.normAfterMerge ? netops::layerNorm(rows(x), m.normW, m.normB, 1e-6)[0]
                                                 : rows(netops::layerNorm(x, m.normW, m.normB, 1e-6)[0]);
  return netops::affine(netops::affine(normed, m.fc1W, m.fc1B).gelu(), m.fc2W, m.fc2B);
}

tensor::Tensor Tower::encode(const Patches& in) const { return picture(in).rows; }

llm::Picture Tower::picture(const image::Image& picture) const { return this->picture(patches(picture, config_.patches)); }

llm::Picture Tower::picture(const Patches& in) const {
  const TowerConfig& c = config_;
  const PatchConfig& p = c.patches;
  const Grid& g = in.grid;
  const int64_t patchWidth = 3 * p.temporalPatchSize * p.patchSize * p.patchSize, merge = p.mergeSize;
  if (g.t < 1 || g.h < merge || g.w < merge || g.h % merge != 0 || g.w % merge != 0)
    throw Error("Tower::encode: a grid of " + std::to_string(g.t) + " x " + std::to_string(g.h) + " x " +
                std::to_string(g.w) + " patches: expected at least one frame and sides that are multiples of " +
                std::to_string(merge));
  if (in.pixels.ndim() != 2 || in.pixels.size(0) != g.patches() || in.pixels.size(1) != patchWidth)
    throw Error("Tower::encode: patches of shape " + tensor::shapeText(in.pixels.shape()) + ", expected [" +
                std::to_string(g.patches()) + ", " + std::to_string(patchWidth) + "]");
  const int64_t n = g.patches(), head = c.hidden / c.heads, frame = g.h * g.w;
  const auto coordinates = patchCoordinates(g, merge);
  const int64_t side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(c.positions))));
  const tensor::Tensor embedded = netops::affine(in.pixels.cast(DType::F32).contiguous(), patchW_, patchB_);
  tensor::Tensor x = (tensor::lazy(embedded) +
                      tensor::lazy(interpolatedPositions(positions_.data<float>(), side, c.hidden, g, coordinates)))
                         .eval();
  const std::pair<tensor::Tensor, tensor::Tensor> rotary = rotaryTables(coordinates, head, c.ropeTheta);
  const tensor::Tensor &cos = rotary.first, &sin = rotary.second;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head));
  llm::Picture out{0, {}, g.t, g.h / merge, g.w / merge};
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    const tensor::Tensor qkv = netops::affine(netops::layerNorm(x, b.norm1w, b.norm1b, 1e-6)[0], b.qkvw, b.qkvb);
    const auto part = [&](int64_t i) { return qkv.slice(1, i * c.hidden, (i + 1) * c.hidden).reshape({n, c.heads, head}); };
    const tensor::Tensor q = rotated(part(0), cos, sin), k = rotated(part(1), cos, sin), v = part(2);
    // Each frame's patches attend each other (transformers' cu_seqlens: one segment a frame).
    std::vector<tensor::Tensor> frames;
    for (int64_t f = 0; f < g.t; ++f) {
      const auto heads = [&](const tensor::Tensor& t) {
        return t.slice(0, f * frame, (f + 1) * frame).transpose(0, 1).contiguous();
      };
      frames.push_back(netops::attention(heads(q), heads(k), heads(v), scale).transpose(0, 1).reshape({frame, c.hidden}));
    }
    const tensor::Tensor attended = netops::affine(tensor::concat(frames, 0), b.projw, b.projb);
    x = (tensor::lazy(x) + tensor::lazy(attended)).eval();
    const tensor::Tensor inner = netops::affine(netops::layerNorm(x, b.norm2w, b.norm2b, 1e-6)[0], b.fc1w, b.fc1b);
    const tensor::Tensor act = c.tanhGelu ? inner.geluTanh() : inner.gelu();
    x = (tensor::lazy(x) + tensor::lazy(netops::affine(act, b.fc2w, b.fc2b))).eval();
    for (size_t d = 0; d < c.deepstack.size(); ++d)
      if (c.deepstack[d] == static_cast<int64_t>(i)) out.deepstack.push_back(merged(deepstackMergers_[d], x));
  }
  out.rows = merged(merger_, x);
  return out;
}

}  // namespace gizml::vision
