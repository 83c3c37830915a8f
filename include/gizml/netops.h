#pragma once
// gizml::netops: the operations of networks on Tensors (spec gizml:netops): row terms and norms,
// losses, argmax, attention, dropout, convolution and pooling. Each adds in the one order the
// spec spells out (docs/netops.md). attention, cross entropy, layer norm (and their gradients)
// and dropout run where their operands are, in the same steps on the CPU and a GPU (the same
// bits); for the others a GPU operand is an Error naming the function until its GPU kernel
// exists (no hidden copy to the host). F64 operands: layerNorm, layerNormGrad, crossEntropyLoss,
// crossEntropyRows, crossEntropyGrad and dropout compute in f64 on the host (the same steps in
// the same order); every other function here rejects F64 with an Error naming it.
#include <gizml/tensor.h>

#include <cstdint>
#include <vector>

namespace gizml::netops {

using tensor::Key;
using tensor::Tensor;

/// x Wᵀ + b: x [rows, in], w [out, in], b [out] give [rows, out] F32. `compute` is the dtype of
/// the products on a GPU (a float dtype); the CPU multiplies in F32 (cpu::sgemm's order), then
/// adds b.
Tensor affine(const Tensor& x, const Tensor& w, const Tensor& b, DType compute = DType::F32);

/// Layer normalization over the last axis: (x - mean) rstd weight + bias, mean and var over the
/// row (1/n, as torch) as in-order f32 sums, rstd = 1 / sqrt(var + eps). Returns {y (x's shape,
/// F32), mean, rstd (x's shape less its last axis)}; all in f64 (F64 results) when an operand is F64.
std::vector<Tensor> layerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);

/// layerNorm's gradients {dx, dweight, dbias} from dy and layerNorm's mean and rstd:
/// dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy weight; dweight, dbias add over rows in order.
/// In f64 (F64 results) when an operand is F64.
std::vector<Tensor> layerNormGrad(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                  const Tensor& rstd);

/// Softmax cross-entropy of logits [rows, classes] against labels: each row's loss
/// m + log(sum exp(x - m)) - x[label] (the sum in 16 lanes), their mean in f64 in row order
/// (on the host: a GPU's rows are waited for). F64 logits: every step in f64 (libm's exp, log).
double crossEntropyLoss(const Tensor& logits, const std::vector<int64_t>& labels);
/// Each row's loss of crossEntropyLoss, [rows] F32 where the logits are (on a GPU: no wait); F64
/// for F64 logits.
Tensor crossEntropyRows(const Tensor& logits, const std::vector<int64_t>& labels);
/// (softmax - onehot) scale, [rows, classes] F32; the softmax is exp(x - m) times the f32 of 1/sum.
/// F64 logits give F64, every step in f64.
Tensor crossEntropyGrad(const Tensor& logits, const std::vector<int64_t>& labels, double scale);

/// softmax(q kᵀ scale) v without the (tq, tk) scores: q [b, tq, d], k [b, tk, d], v [b, tk, e]
/// give [b, tq, e] F32 where they are. `causal`: query i sees keys j <= i + tk - tq. `rate` > 0 drops each weight
/// where word (b tq + i) tk + j of `key`'s uniform draw is below rate and scales the rest by
/// 1 / (1 - rate). Order: the spec's blocks of 16 keys (docs/netops.md).
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal = false,
                 double rate = 0.0, const Key& key = Key());

/// The additive mask of causal attention, [tq, tk] F32: 0 where j <= i + tk - tq, else -inf.
Tensor causalMask(int64_t tq, int64_t tk);

/// The patches of x [n, c, h, w] under a kh x kw window at `stride` with `pad` zeros around:
/// [n oh ow, c kh kw] F32, so a convolution is one matmul.
Tensor im2col(const Tensor& x, int64_t kh, int64_t kw, int64_t stride, int64_t pad);
/// The adjoint of im2col: [n, c, h, w], each element the sum of the patch entries that copied it,
/// window offsets (i, j) in increasing order.
Tensor col2im(const Tensor& cols, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride,
              int64_t pad);

/// The patches of x [t, c] (time first) under k taps `dilation` apart at `stride` with `pad`
/// zeros before and after: [ot, c k], entry (o, ch k + j) = x[o stride + j dilation - pad, ch].
/// With count >= 0 only the `count` rows from row `first`.
Tensor im2col1d(const Tensor& x, int64_t k, int64_t stride, int64_t pad, int64_t dilation, int64_t first = 0,
                int64_t count = -1);
/// The adjoint of im2col1d at dilation 1 on cols [n, c k]: [length, c], entry (o, ch) the sum of
/// cols[i, ch k + j] with i stride + j - pad = o, j in increasing order.
Tensor col2im1d(const Tensor& cols, int64_t c, int64_t length, int64_t k, int64_t stride, int64_t pad);

/// The 1-D convolution of x [t, c] by w [o, c, k] with bias [o] (none when `bias` is empty):
/// [ot, o], PyTorch's conv1d of xᵀ transposed.
Tensor conv1d(const Tensor& x, const Tensor& w, const std::vector<Tensor>& bias, int64_t stride, int64_t pad,
              int64_t dilation);
/// The 1-D transposed convolution of x [n, c] by w [c, o, k]: [(n - 1) stride - 2 pad + k, o],
/// PyTorch's conv_transpose1d of xᵀ transposed.
Tensor convTranspose1d(const Tensor& x, const Tensor& w, const std::vector<Tensor>& bias, int64_t stride, int64_t pad);

/// Max (or mean) pooling of x [n, c, h, w] over size x size windows at `stride` (no padding):
/// the max is the first largest in window order (NaN wins, as in torch); the mean adds the
/// window in order and multiplies by the f32 of 1 / (size size).
Tensor pool2d(const Tensor& x, int64_t size, int64_t stride, bool average);
/// pool2d's gradient against x: each element adds, over the windows holding it in order,
/// dy / (size size) (average) or dy where it is the window's max.
Tensor pool2dGrad(const Tensor& dy, const Tensor& x, int64_t size, int64_t stride, bool average);

/// GroupNorm of x [c, ...] (channel first): each of `groups` groups of c / groups channels less
/// its mean over sqrt(variance + eps) (both summed in f64), times w[ch] plus b[ch], then SiLU
/// when `act`; `dtype` elements of x's shape.
Tensor groupNorm(const Tensor& x, int64_t groups, const Tensor& w, const Tensor& b, double eps, bool act = false,
                 DType dtype = DType::F32);

/// Tensor.argmax: the index of each row's (last axis') largest element, the first of equals;
/// NaN never wins (a row of NaNs gives 0).
std::vector<int64_t> argmax(const Tensor& x);

/// Tensor.dropout: x where word i of `key`'s uniform draw is at least p, times the f32 of
/// 1 / (1 - p), else 0 (x's dtype). The same key gives the same mask, so a backward pass
/// applies it again from the key. F64: x times the f64 of 1 / (1 - p), in f64.
Tensor dropout(const Tensor& x, const Key& key, double p);

}  // namespace gizml::netops

// The rows of a transformer step, the modulated norms, INT8 rows and convolution by patches.
#include <gizml/netops_rows.h>
