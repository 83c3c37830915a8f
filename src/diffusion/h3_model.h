#pragma once
// MiniMax H3's weights, AdaLN rows and packed sequence, shared by its load, forward and sampling
// (h3_load.cpp, h3_forward.cpp, h3_sample.cpp) and the tests of one block.
#include <gizml/diffusion.h>

#include <array>
#include <optional>
#include <vector>

#include "dit_layers.h"

namespace gizml::diffusion {

namespace h3 {

constexpr int kModalities = 3;  // AdaLN rows per timestep: 0 video, 1 text, 2 audio
constexpr int kVideoTag = 0, kTextTag = 1, kAudioTag = 2;
constexpr int kAudioChannels = 2;  // stereo, packed channel-major
constexpr double kKeyframeT = 0.999;  // the t a keyframe is held at (pipeline's keyframe_noise_aug)
constexpr double kEps = 1e-5;          // every RMSNorm's (norm, q/k, final)

struct Block {
  T::Tensor norm1, norm2;  // [hidden]
  // INT8 codes as stored (ComfyUI's int8_tensorwise files) run as W8A8 (Int8Linear), the rest F32.
  Projection qkv, out;     // [3 inner, hidden] stacked q; k; v, [hidden, inner]
  T::Tensor qNorm, kNorm;  // [head dim]
  Projection fc1, fc2;     // SwiGLU: fc2(silu(gate) value), fc1 = [gate; value]
  std::optional<Linear> adaln;  // [3 x 6 hidden, time width]; none in the token refiner
};

// The AdaLN rows of some timesteps: each block's [timesteps x 3, 6 hidden] split into its six
// [timesteps x 3, hidden] (shift, scale, gate of the attention, then of the MLP), row
// timestep x 3 + modality; the output norm's shift and scale [timesteps, hidden].
struct Mods {
  std::vector<std::array<T::Tensor, 6>> blocks;
  T::Tensor finalShift, finalScale;
  int64_t bytes() const;
};

// The timesteps of one pass, in the order a row's timestep index counts them.
enum TimeIndex { kVideoT = 0, kAudioT = 1, kKeyframeTIndex = 2, kTimes = 3 };

// Every packed row's rotary position (t, h, w), AdaLN row (timestep x 3 + tag) and timestep.
struct Layout {
  std::vector<double> positions;  // [rows x 3]
  std::vector<double> modRows, timeRows;
  int64_t rows = 0;

  void add(double t, double h, double w, int tag, int time) {
    positions.insert(positions.end(), {t, h, w});
    modRows.push_back(time * kModalities + tag);
    timeRows.push_back(time);
    ++rows;
  }
};

// Rotary angles' cosines and sines [rows, 1, 6 x freq] for the packed rows.
struct Rope {
  T::Tensor cos, sin;
};

}  // namespace h3

struct H3Model::Weights {
  std::optional<gizhw::gpu::Gpu> gpu;  // where the tensors are; none: the host
  int64_t hidden = 0, heads = 0, headDim = 0, ffn = 0, videoChannels = 0, audioChannels = 0, textDim = 0;
  int64_t freqDim = 0;  // the timestep sinusoid's width
  Linear videoIn, audioIn, textIn;
  std::optional<Linear> timeIn, timeOut;  // the time embedder, SiLU between
  std::optional<T::Tensor> adalnTable;    // pruned checkpoints: [grid, time width], the AdaLN input
  T::Tensor invFreq;                      // [rope freq]
  std::vector<h3::Block> refiner, blocks;
  T::Tensor refinerNorm, finalNorm;  // [hidden]
  Linear finalAdaln, videoOut, audioOut;

  // A model's weights (for the tests of its parts).
  static const Weights* of(const H3Model& m) { return m.weights_.get(); }
};

struct H3Model::Tables {
  std::vector<float> videoSigmas, audioSigmas;
  std::vector<h3::Mods> steps;  // each pass's rows for its (video, audio, keyframe) t
  int64_t bytes = 0;

  static const Tables* of(const H3Model& m) { return m.tables_.get(); }
};

namespace h3 {

// t (made on the host, or the caller's) where the weights are.
inline T::Tensor placed(const H3Model::Weights& w, const T::Tensor& t) { return w.gpu ? t.on(*w.gpu) : t; }

// The AdaLN rows for timesteps ts (t in [0, 1]).
Mods modulations(const H3Model::Weights& w, const std::vector<double>& ts);

// The [text | keyframes | target audio | target video] layout of MiniMaxH3PrepareLayoutStep for a
// target video of frames x height x width latent pixels and audioLatents stereo audio latents.
Layout layoutOf(const H3Condition& c, int64_t frames, int64_t height, int64_t width, int64_t audioLatents);
Rope ropeOf(const H3Model::Weights& w, const Layout& l);

// One block on the packed rows x [rows, hidden]; modRows [rows]: each row's timestep x 3 + tag.
T::Tensor block(const H3Model::Weights& w, const Block& b, const T::Tensor& x, const std::array<T::Tensor, 6>& mods,
                const T::Tensor& modRows, const Rope& rope);

// lora merged into w's linears (h3_lora.cpp): a block linear still holding INT8 codes (load turns
// them into Int8Linear after every LoRA) is dequantized, merged and runs in F32 from then on.
void mergeLora(H3Model::Weights& w, const H3Lora& lora);

// One pass with the given AdaLN rows (timesteps in TimeIndex order).
H3Latents pass(const H3Model::Weights& w, const H3Latents& x, const H3Condition& c, const Mods& mods);

}  // namespace h3

}  // namespace gizml::diffusion
