#pragma once
// Gated DeltaNet's elementwise and per-head inner loops (gated_delta_net.h), written once with
// Highway and compiled for each x86 target; the best one the CPU has is chosen at run time.
// The chunked prefill's matrix products go through cpu::sgemm instead.
#include <cstdint>

namespace gizml::llm::delta {

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

}  // namespace gizml::llm::delta
