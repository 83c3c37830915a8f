#pragma once
/// gizml::vision: the vision towers of multimodal language models (Qwen3.5's and Qwen3-VL's), from
/// a picture to the rows a language model reads in place of its picture's placeholder tokens, as
/// transformers' Qwen2-VL image processor and Qwen3_5VisionModel compute them.
#include <gizml/image.h>
#include <gizml/llm.h>
#include <gizml/tensor.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gizml::vision {

/// How a picture becomes patches: the fields of a Qwen2-VL image processor's
/// preprocessor_config.json (the defaults are Qwen3.5's).
struct PatchConfig {
  int64_t patchSize = 16;          // pixels a patch's side
  int64_t temporalPatchSize = 2;   // frames a patch (a picture is repeated to fill them)
  int64_t mergeSize = 2;           // patches a side of one row the language model reads
  int64_t minPixels = 65536;       // size.shortest_edge: the fewest pixels after resizing
  int64_t maxPixels = 16777216;    // size.longest_edge: the most
  std::array<float, 3> mean = {0.5f, 0.5f, 0.5f};  // image_mean, per channel
  std::array<float, 3> std = {0.5f, 0.5f, 0.5f};   // image_std
};

/// Patches along time, height and width.
struct Grid {
  int64_t t = 0, h = 0, w = 0;
  int64_t patches() const { return t * h * w; }
};

/// A picture's patches as the tower reads them: F32 [grid.patches(), 3 * temporalPatchSize *
/// patchSize²], each row a patch's channels, frames, rows and columns, in the order of blocks of
/// mergeSize x mergeSize patches (transformers' pixel_values and image_grid_thw).
struct Patches {
  tensor::Tensor pixels;
  Grid grid;
};

/// The height and width a picture is resized to (transformers' smart_resize, in its f64 steps):
/// each a multiple of factor, nearest to the original (halves to even, as Python's round), scaled
/// to keep the pixels within [minPixels, maxPixels], never below factor. A side below factor is
/// fine; an aspect ratio above 200, a side of 0 (or above 2^26) or a non-positive factor or pixel
/// count is a gizml::Error naming it.
std::pair<int64_t, int64_t> smartResize(int64_t height, int64_t width, int64_t factor, int64_t minPixels,
                                        int64_t maxPixels);

/// The picture resized (Pillow's BICUBIC, the same bytes) to smartResize's size with factor
/// patchSize * mergeSize, each byte times 1/255 in f64 rounded to f32, (x - mean) / std in f32, and
/// cut into patches: the values of transformers' Qwen2VLImageProcessorPil, bit for bit on its
/// fixtures. A picture without pixels (or a side above image::kMaxSide), a patch, frame or merge
/// size outside 1 to image::kMaxSide, pixel counts below 1, a std of 0 or a mean or std not
/// finite, or smartResize's errors, is a gizml::Error naming it.
Patches patches(const image::Image& picture, const PatchConfig& config);

/// A vision tower's sizes: a Hugging Face config.json's vision_config (Qwen3.5's qwen3_5_vision,
/// Qwen3-VL's qwen3_vl), and its preprocessor_config.json's patches.
struct TowerConfig {
  int64_t depth = 0;            // blocks
  int64_t hidden = 0;           // hidden_size
  int64_t intermediate = 0;     // the blocks' MLP width
  int64_t heads = 0;            // num_heads
  int64_t outHidden = 0;        // out_hidden_size: the language model's width
  int64_t positions = 0;        // num_position_embeddings: a square table, interpolated to each grid
  double ropeTheta = 10000.0;   // the 2-D rotary embedding's base
  bool tanhGelu = true;         // hidden_act gelu_pytorch_tanh (else the erf form)
  /// deepstack_visual_indexes (Qwen3-VL): the blocks whose output, merged, the language model
  /// adds after its first layers (llm::Picture::deepstack).
  std::vector<int64_t> deepstack;
  PatchConfig patches;
};

/// Qwen3.5's vision tower (transformers' Qwen3_5VisionModel; Qwen3-VL's has the same blocks): the
/// patches' linear embedding plus the learned positions interpolated (bilinear, corners aligned)
/// to the grid; blocks of LayerNorm, attention over each frame's patches with a 2-D rotary
/// embedding (height and width) and LayerNorm, MLP; then the merger: LayerNorm, each block of
/// mergeSize² patches as one row, two linears with GELU between. Qwen3-VL's deepstack blocks'
/// outputs go through mergers of their own (LayerNorm after the merge). On the host in F32.
class Tower {
 public:
  /// A Hugging Face folder of a multimodal model (config.json with vision_config, the
  /// model.visual.* tensors in its safetensors, preprocessor_config.json when present). A missing
  /// or misshapen tensor, or a config this tower does not run, is a gizml::Error naming it.
  static Tower load(const std::string& folder);

  const TowerConfig& config() const { return config_; }
  /// The rows for one picture's patches: F32 [patches / mergeSize², outHidden], in the order
  /// of its placeholder tokens. Patches of another width, or a grid whose sides are not
  /// multiples of mergeSize, are a gizml::Error.
  tensor::Tensor encode(const Patches& patches) const;
  /// The picture as a language model's prompt reads it: its rows, their grid (the patches' over
  /// mergeSize) and deepstack rows, `first` 0 (Model::chatTokens places it).
  llm::Picture picture(const image::Image& picture) const;
  /// The same for patches.
  llm::Picture picture(const Patches& patches) const;

 private:
  struct Block {
    tensor::Tensor norm1w, norm1b, norm2w, norm2b, qkvw, qkvb, projw, projb, fc1w, fc1b, fc2w, fc2b;
  };
  struct Merger {
    tensor::Tensor normW, normB, fc1W, fc1B, fc2W, fc2B;
    bool normAfterMerge = false;  // deepstack's: LayerNorm over the merged rows
  };
  tensor::Tensor merged(const Merger& m, const tensor::Tensor& x) const;
  TowerConfig config_;
  tensor::Tensor patchW_, patchB_;  // [hidden, 3 T P P], [hidden]
  tensor::Tensor positions_;        // [positions, hidden]
  std::vector<Block> blocks_;
  Merger merger_;
  std::vector<Merger> deepstackMergers_;  // one per config_.deepstack block
};

}  // namespace gizml::vision
