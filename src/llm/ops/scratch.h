#pragma once
// A pass's intermediate rows in buffers of the calling thread, kept from layer to layer and step
// to step. Fresh zeroed buffers cost a 512-row prefill a memset and page faults of about 24 MB a
// layer on the calling thread alone, while the other thread waited (5 % of a Qwen3-shaped
// prefill's samples). The cost: they keep the size of the largest pass (about 50 KB a prompt row
// on Qwen3-0.6B).
#include <gizml/tensor.h>

#include <cstdint>

namespace gizml::llm::ops {

/// The buffers a layer uses at once, one each (a layer's forward is never nested in another's).
enum class Scratch {
  Normed, Output,                                           // a layer's normed input, its mixer's or MLP's output
  Query, Key, Value, Context, QueryAndGate, Gate,           // attention
  MlpGate, MlpUp,                                           // a gated MLP
  DeltaIn, DeltaZ, DeltaB, DeltaA, DeltaMixed, DeltaOut,    // Gated DeltaNet
  Count
};

/// An F32 tensor [rows, width] over the calling thread's buffer for `use` where `like` is (host
/// memory or its GPU), grown when needed; its values are whatever the buffer held (write before
/// reading). The next call for the same use reuses the memory.
tensor::Tensor scratch(Scratch use, int64_t rows, int64_t width, const tensor::Tensor& like);

}  // namespace gizml::llm::ops
