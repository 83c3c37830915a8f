#pragma once
// Gated DeltaNet's CPU kernels (Qwen 3.5's linear attention; the layer is
// llm/models/gated_delta_net.h): its elementwise and per-head inner loops, written once with
// Highway and compiled for each x86 target (the best one the CPU has is chosen at run time), and
// the delta rule over a sequence's rows, token by token or in chunks whose matrix products go
// through cpu::sgemm.
#include <cstdint>

namespace gizml::cpu::delta {

/// out [rows, channels] = silu(causal depthwise conv) of the inputs: output row t reads input
/// rows t .. t + kernel - 1, of which the first `held` come from held [held, channels] and the
/// rest from x [rows, channels]; taps [kernel, channels] (tap j of channel c at j * channels + c).
void convSilu(const float* held, const float* x, const float* taps, int64_t rows, int64_t channels, int64_t kernel,
              float* out);

/// Each of `count` runs of n floats, the i-th at x + i * stride, times scale / sqrt(|run|^2 + 1e-6).
void l2normalize(float* x, int64_t count, int64_t stride, int64_t n, float scale);

/// One token of the delta rule on one value head's state s [dk, dv] (row-major):
///   S = decay S;  S += k (beta (v - S^T k))^T;  o = S^T q
/// in one sweep over S, a block of columns at a time (its reads and writes meet in L1).
void step(float* s, const float* q, const float* k, const float* v, float decay, float beta, int64_t dk, int64_t dv,
          float* o);

/// Each of `count` runs of n floats: o = rmsnorm(o) w silu(z) (the gated norm of a value head).
void gatedNorm(float* o, const float* z, const float* w, int64_t count, int64_t n, float eps);

/// The heads of a layer: each key head serves valueHeads / keyHeads consecutive value heads.
struct Heads {
  int64_t keyHeads, valueHeads, keyDim, valueDim;
};

/// The delta rule over `rows` rows of one sequence: mixed [rows, channels] (each row q | k | v,
/// the conv's activated and normalised outputs; channels = 2 keyHeads keyDim + valueHeads valueDim),
/// beta and g (the log decay) [rows, valueHeads], advancing memory (S of each value head
/// [valueHeads, keyDim, valueDim]) and writing o [rows, valueHeads valueDim]. Token by token
/// (step), in parallel over the value heads.
void recurrent(const Heads& h, const float* mixed, const float* beta, const float* g, int64_t rows, float* memory,
               float* o);
/// The same rule in chunks of 64 rows (transformers' torch_chunk_gated_delta_rule), which gives
/// the recurrent form's result to rounding.
void chunked(const Heads& h, const float* mixed, const float* beta, const float* g, int64_t rows, float* memory,
             float* o);

/// One sequence's rows through the layer's token mixing, from the projections qkv [rows,
/// channels], b and a [rows, valueHeads] to o [rows, valueHeads valueDim]:
///   the causal depthwise conv (taps [kernel, channels]) over conv [kernel - 1, channels] (the
///   last inputs, oldest first; kept up to date) and these rows, then silu;
///   q and k L2-normalised per head (q also over sqrt(keyDim));
///   beta = sigmoid(b), g = decayRate softplus(a + dtBias) (both [valueHeads]);
///   the delta rule on memory: recurrent for one row, chunked for more.
void mix(const Heads& h, int64_t kernel, const float* qkv, const float* b, const float* a, int64_t rows,
         const float* taps, const float* decayRate, const float* dtBias, float* conv, float* memory, float* o);

}  // namespace gizml::cpu::delta
