#pragma once
// The pieces the DiTs (Z-Image, klein) share on tensor ops: a bias-free projection in F32 or
// W8A8, the q/k RMSNorm, RoPE on interleaved pairs and its angle tables, and the time sinusoid.
#include <gizml/tensor.h>

#include <optional>
#include <vector>

#include "int8_linear.h"
#include "weight_file.h"

namespace gizml::diffusion {

// x Wᵀ without bias: W in F32 (the reference) or W8A8, W dropped once quantized. On the host W
// stays as the file stores it (F16, BF16, FP8 as BF16 and its scale) and becomes F32 at each use,
// so that a DiT of 16-bit weights holds its file's size and one F32 weight at a time. A file's
// INT8 codes (ComfyUI's) become the W8A8 layer as they are, or F32 once for the reference.
struct Projection {
  StoredWeight w;  // [out, in]
  std::optional<Int8Linear> q;

  static Projection of(StoredWeight w, bool int8);
  static Projection of(T::Tensor w, bool int8);
  T::Tensor operator()(const T::Tensor& x) const;
  Projection to(const gizhw::gpu::Gpu& gpu) const;
};

// RMSNorm over the last axis: x / sqrt(mean(x²) + eps) w.
T::Tensor rmsNorm(const T::Tensor& x, const T::Tensor& w, double eps);

struct Rope {
  T::Tensor cos, sin;  // [tokens, 1, head dim / 2]
};

// The angles of tokens at positions (positions.size() / axes.size() tokens, one value an axis):
// axis a's pairs j turn by position (1 / theta^(2j / dims_a)), in f64, then rounded to f32 (as
// ComfyUI's EmbedND and diffusers' get_1d_rotary_pos_embed do).
Rope ropeTables(const std::vector<double>& positions, const std::vector<int64_t>& axes, double theta);

// The rotation of each pair (2i, 2i+1) of x [tokens, heads, head dim] by r's angles.
T::Tensor rotated(const T::Tensor& x, const Rope& r);

// The time sinusoid [1, dims] of t: [cos(t f_i), sin(t f_i)], f_i = exp(-ln(10000) i / (dims / 2)),
// each step in float32 as torch computes diffusers' Timesteps(flip_sin_to_cos) and ComfyUI's
// timestep_embedding.
T::Tensor timeSinusoid(float t, int64_t dims);

}  // namespace gizml::diffusion
