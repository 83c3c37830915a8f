#pragma once
// The operations of a language model's layer between its matrix products, on F32 row tensors
// [rows, width] of one device (llm/ops/host.h). Each writes in place or into a given tensor, so
// that a pass reuses its buffers (llm/ops/scratch.h). CPU implementation: cpu/layer_rows.h.
#include <gizml/tensor.h>

#include <cstdint>
#include <vector>

namespace gizml::llm::ops {

using tensor::Tensor;

/// out = x / rms(x) * w over each row (w [width]; out may be x).
void rmsNorm(const Tensor& x, const Tensor& w, float eps, const Tensor& out);
/// x += y, then out = rmsNorm(x) (a residual and the next layer's norm; on a GPU one launch).
void addThenRmsNorm(const Tensor& x, const Tensor& y, const Tensor& w, float eps, const Tensor& out);

/// Rotate-half RoPE of each row of q [rows, qHeads headDim] and k [rows, kHeads headDim], row r
/// at position start + r: pair (i, i + half) of each head turned by position invFreq[i]
/// (invFreq [half]). With `positions` (I32 [rows, half]: multimodal RoPE's, whose pairs follow
/// time, height or width; or [rows]: a batch's rows of several sequences), row r's pair i at
/// positions[r, i] (or positions[r]) instead. They are where q is, or in host memory (rows on a GPU then read one
/// copy of the same positions for every layer of a pass).
void rope(const Tensor& q, int64_t qHeads, const Tensor& k, int64_t kHeads, int64_t headDim, const Tensor& invFreq,
          int64_t start, const Tensor* positions = nullptr);

/// x += y.
void addInPlace(const Tensor& x, const Tensor& y);

enum class Activation { Silu, GeluTanh };
/// gate = act(gate) * up.
void gatedActivation(const Tensor& gate, const Tensor& up, Activation act);

/// x *= sigmoid(gate).
void sigmoidGate(const Tensor& x, const Tensor& gate);

/// x = cap tanh(x / cap).
void softcap(const Tensor& x, float cap);

/// x *= s.
void scaleInPlace(const Tensor& x, float s);

/// Each run of 2 width values of both into width values of first, then of second.
void splitRuns(const Tensor& both, int64_t width, const Tensor& first, const Tensor& second);

/// [ids.size(), width] of x's rows ids (x [rows, width]).
Tensor gatherRows(const Tensor& x, const std::vector<int64_t>& ids);

/// x = 0.
void zero(const Tensor& x);

}  // namespace gizml::llm::ops
