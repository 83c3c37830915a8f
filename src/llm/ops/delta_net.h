#pragma once
// Gated DeltaNet's token mixing (Qwen 3.5's linear attention; the layer is
// llm/models/gated_delta_net.h) on F32 row tensors, and the state it keeps per sequence. CPU
// implementation: cpu/delta_net.h.
#include <gizhw/gpu.h>
#include <gizml/tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace gizml::llm::ops {

using tensor::Tensor;

struct DeltaNetShape {
  int64_t keyHeads, valueHeads, keyDim, valueDim, kernel;
  /// The conv's channels: q, k (keyHeads keyDim each) and v (valueHeads valueDim).
  int64_t channels() const { return 2 * keyHeads * keyDim + valueHeads * valueDim; }
};

/// One sequence's state of one Gated DeltaNet layer, on the device of the layer's weights.
struct DeltaNetState {
  Tensor conv;    // the conv's last (kernel - 1) inputs [kernel - 1, channels], oldest first
  Tensor memory;  // S of each value head [valueHeads, keyDim, valueDim]

  /// Zeros of the shape's sizes, in host memory or on `gpu`.
  static DeltaNetState zeros(const DeltaNetShape& shape, const std::optional<gizhw::gpu::Gpu>& gpu = std::nullopt);
  /// A copy that shares no memory with this one.
  DeltaNetState copy() const;
  /// Every value back to zero.
  void clear();
};

/// The layer's weights that mixing reads.
struct DeltaNetWeights {
  Tensor taps;       // [kernel, channels]: a tap across the channels is contiguous
  Tensor decayRate;  // -exp(A_log) per value head
  Tensor dtBias;     // [valueHeads]
};

/// A run of one sequence's consecutive rows of a pass, and the state they advance.
struct DeltaNetRows {
  int64_t first, rows;
  DeltaNetState* state;
};

/// The runs' rows of a pass: from the projections qkv [n, channels], b and a [n, valueHeads]
/// into the same rows of o [n, valueHeads valueDim], each run advancing its state
/// (cpu::delta::mix says how); no state twice. On a GPU each step is one launch for all the runs
/// (their states found through a table copied up once), so a decode step of any sequences is
/// the same launches; on the CPU run by run.
void deltaNetMix(const DeltaNetShape& shape, const DeltaNetWeights& w, const Tensor& qkv, const Tensor& b,
                 const Tensor& a, const std::vector<DeltaNetRows>& runs, const Tensor& o);

/// o = rmsnorm(o) w silu(z) over each value head's run of valueDim values (w [valueDim]).
void gatedNorm(const Tensor& o, const Tensor& z, const Tensor& w, float eps);

}  // namespace gizml::llm::ops
