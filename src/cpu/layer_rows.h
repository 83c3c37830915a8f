#pragma once
// The steps of a language model's layer between its matrix products, over f32 rows on the CPU:
// RMS norms, rotary embeddings, the MLP's gated activation, the attention output's gate, residual
// adds, logit soft-capping. A prefill's rows spread over the thread pool (on the caller alone
// they were time the other thread waited: with attention's split, 8 % of a Qwen3-shaped
// 2-thread prefill); a decode step's few rows stay on the calling thread. Each row or element is
// computed as alone, so the bits do not depend on the split.
#include <gizml/function_ref.h>

#include <cstdint>

namespace gizml::cpu {

/// body(r0, r1) over `rows` items of `width` floats each, spread over the thread pool in parts of
/// about 16,384 floats (a decode step's few rows stay on the calling thread).
void forEachRow(int64_t rows, int64_t width, FunctionRef<void(int64_t, int64_t)> body);

/// out [rows, dim] = x / rms(x) * w (w [dim]; out may be x).
void rmsNormRows(const float* x, int64_t rows, int64_t dim, const float* w, float eps, float* out);

/// Rotate-half RoPE of `rows` rows of q (qHeads heads each) and k (kHeads heads), row r at
/// `start + r`: the first `half` pairs (i, i + half) of each head of headDim values turned by
/// position * invFreq[i] (the angle in f32, as transformers computes it; its cos and sin rounded
/// once). positions (when not null, [rows, half]): row r's pair i at positions[r half + i] instead.
void ropeRows(float* q, int64_t qHeads, float* k, int64_t kHeads, int64_t rows, int64_t headDim,
              const float* invFreq, int64_t half, int64_t start, const int32_t* positions = nullptr);

/// x += y over n values.
void addRows(float* x, const float* y, int64_t n);

enum class GateActivation { Silu, GeluTanh };
/// gate = act(gate) * up over n values.
void gatedActivation(float* gate, const float* up, int64_t n, GateActivation act);

/// x *= sigmoid(gate) over n values.
void sigmoidGate(float* x, const float* gate, int64_t n);

/// x = cap tanh(x / cap) over n values.
void softcap(float* x, int64_t n, float cap);

/// x *= s over n values.
void scaleRows(float* x, int64_t n, float s);

/// Each of `runs` runs of 2 width values of both: its first width values into first, the rest into
/// second (runs of width each).
void splitRuns(const float* both, int64_t runs, int64_t width, float* first, float* second);

/// out row i = x row ids[i] for i < count (rows of width floats).
void gatherRows(const float* x, const int64_t* ids, int64_t count, int64_t width, float* out);

/// x = 0 over n values.
void zeroRows(float* x, int64_t n);

}  // namespace gizml::cpu
