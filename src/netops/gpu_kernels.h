#pragma once
// The launches of netops' GPU kernels (src/gpu/kernels/netops.cu.inc) on the operands' GPU.
#include <gizml/netops.h>

#include <vector>

namespace gizml::netops::detail {

/// Each row's cross-entropy loss of logits [rows, classes] (contiguous F32 on a GPU), [rows] F32
/// there; the labels are checked already.
Tensor crossEntropyRowsGpu(const Tensor& logits, const std::vector<int64_t>& labels);

/// attention of contiguous F32 q [b, tq, d], k [b, tk, d], v [b, tk, e] on one GPU, checked.
Tensor attentionGpu(const Tensor& q, const Tensor& k, const Tensor& v, float scale, bool causal, float rate, float keep,
                    const Key& key);

}  // namespace gizml::netops::detail
