#pragma once
// A normalised channel's affine and SiLU on the CPU, SIMD (norm_act_simd.cpp), for netops'
// groupNorm: the bits of its scalar steps on every SIMD target.
#include <cstdint>

namespace gizml::cpu {

/// out[i] = v = ((in[i] - mu) rstd) w + b, each step rounded to f32 (no fma), then with silu
/// v / (1 + gz_exp(-v)) (netops/exp_log.inc's exp), for i < n.
void normalizeAct(const float* in, int64_t n, float mu, float rstd, float w, float b, bool silu, float* out);

}  // namespace gizml::cpu
