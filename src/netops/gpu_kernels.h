#pragma once
// The launches of netops' GPU kernels (src/netops/kernels/netops.cu.inc) on the operands' GPU. The
// operands are contiguous F32 on one GPU and checked already.
#include <gizml/netops.h>

#include <vector>

namespace gizml::netops::detail {

/// Each row's cross-entropy loss of logits [rows, classes], [rows] F32.
Tensor crossEntropyRowsGpu(const Tensor& logits, const std::vector<int64_t>& labels);
/// crossEntropyGrad: (softmax - onehot) scale, [rows, classes] F32.
Tensor crossEntropyGradGpu(const Tensor& logits, const std::vector<int64_t>& labels, float scale);

/// attention of q [b, tq, d], k [b, tk, d], v [b, tk, e].
Tensor attentionGpu(const Tensor& q, const Tensor& k, const Tensor& v, float scale, bool causal, float rate, float keep,
                    const Key& key);

/// layerNorm of x [rows, width]: {y, mean [rows], rstd [rows]}.
std::vector<Tensor> layerNormGpu(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps);
/// layerNormGrad of [rows, width] operands: {dx, dweight, dbias}.
std::vector<Tensor> layerNormGradGpu(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                     const Tensor& rstd);

/// dropout of x (contiguous F32), x's shape.
Tensor dropoutGpu(const Tensor& x, const Key& key, float p, float keep);

}  // namespace gizml::netops::detail
