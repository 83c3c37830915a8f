#pragma once
// gizml::netops, rows part: the operations of a transformer's packed rows (attention over rows,
// QK norm and rotary, neighborhood attention), the modulated norms of diffusion transformers, the
// Hadamard-rotated INT8 rows (ConvRot), convolution by patches, and the GPU kernels of a
// language model's step (argmax, sampling candidates, split sums, rotated norm, SwiGLU).
// Spec: ../shared/spec/002_c8711ad8767f6397.txt (gizml:netops); notes in docs/netops.md ("The rows part").
//
// Host tensors are F32 (BF16 host tensors are read as their F32 values); the host computes
// exactly in F32 in the orders documented per function. Each function runs where its operands are:
// on a GPU with the spec's GPU dtypes (mostly BF16; docs/netops.md says which give the host's
// bits and the tolerances of the rest). The functions taking a Gpu and device addresses run only
// on a GPU.
#include <gizhw/gpu.h>
#include <gizml/tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace gizml::netops {

using tensor::Lazy;
using tensor::Tensor;

/// The largest logits each of a candidates workgroup's 256 threads keeps of the values it reads.
inline constexpr int64_t TOP_EACH = 4;
/// The floats of a row's candidates: 256 TOP_EACH (value, token) pairs.
inline constexpr int64_t CANDIDATE_ROW = 2048;

/// A transformer's QK norm and rotary for each head of q and k: the head over its RMS (eps)
/// times its norm weight (qw, kw: [head] F32), then its values e < half turned with e + half by
/// its row's cos and sin ([rows, half] F32; left default or half = 0: no rotary).
struct HeadPrep {
  Tensor qw;
  Tensor kw;
  Tensor cos;
  Tensor sin;
  double eps = 1e-6;
};

/// p of q and k of the first n rows of qkv ([rows, 3 heads head], each row its q, k and v) in
/// place; row0 is the sequence row of the first (its cos/sin row).
void headPrepInPlace(const Tensor& qkv, int64_t n, int64_t heads, int64_t head, const HeadPrep& p, int64_t row0);

/// Full attention of every head of qkv ([n, 3 heads head]) into out ([queries or n, heads head]):
/// softmax(q k^T / sqrt(head)) v per head, the keys of each group of `group` rows alone (0: all
/// rows; the last group may be shorter). `prep` (none or one HeadPrep) prepares q and k first
/// (on the host on a copy, and in the 8-bit path's quantizing pass: qkv is not changed; on a GPU's
/// BF16 path in place in qkv first, as the reference says). `queries` > 0: only the first
/// `queries` rows ask.
/// `quantized` selects the 8-bit path on GPUs; the host is exact in F32 and ignores it.
void attentionRows(const Tensor& qkv, int64_t heads, int64_t head, bool quantized, int64_t group, const Tensor& out,
                   const std::vector<HeadPrep>& prep = {}, int64_t queries = 0);
/// attentionRows' output as a new tensor.
Tensor attendedRows(const Tensor& qkv, int64_t heads, int64_t head, bool quantized, int64_t group,
                    const std::vector<HeadPrep>& prep = {}, int64_t queries = 0);
/// Attention of the rows of q ([nq, heads head]) over the keys and values of kv ([nk, 2 heads
/// head]: each row's k, then its v) into out ([nq, heads head]).
void crossAttentionRows(const Tensor& q, const Tensor& kv, int64_t heads, int64_t head, const Tensor& out);

/// NATTEN's na3d (dilation 1, not causal) over qkv ([T H W, 3 heads head], rows in (t, h, w)
/// order): each query attends the keys of a window of kernel [kt, kh, kw] (each odd) around it,
/// shifted inward at the grid's edges and clipped to the axis length; scores q . k times scale.
/// Returns [T H W, heads head] (F32 on the host, BF16 on a GPU).
Tensor neighborhood3d(const Tensor& qkv, const std::vector<int64_t>& grid, const std::vector<int64_t>& kernel,
                      int64_t heads, double scale);

/// AdaLN: each row of x ([rows, width]) over its RMS (centered: less its mean, over its standard
/// deviation), times w ([width]), times 1 + scale and plus shift of its modulation row map[r]
/// (map: [rows] F32 row indexes into shift and scale, [modulation rows, width]). F32 on the host,
/// BF16 on a GPU.
Tensor modulatedNorm(const Tensor& x, const Tensor& w, const Tensor& shift, const Tensor& scale, const Tensor& map,
                     double eps, bool centered = false);
/// modulatedNorm into y ([rows, width], F32 or BF16).
void modulatedNormInto(const Tensor& x, const Tensor& w, const Tensor& shift, const Tensor& scale, const Tensor& map,
                       double eps, const Tensor& y, bool centered = false);
/// x ([rows, width] F32) += (y's row over its RMS (eps) times w) times gate's row map[r], in place.
void gatedNormAddInto(const Tensor& x, const Tensor& y, const Tensor& w, const Tensor& gate, const Tensor& map,
                      double eps);

/// ConvRot's activation rows: each 256 values of x ([rows, width], width a multiple of 256) times
/// the regular Hadamard matrix over 16, y in F32; s = max |y| / 127 a row (/ 7 for 4 bits; at
/// least 1e-30); q = y / s to nearest even within [-128, 127] ([-8, 7]). Returns [q, s]: q the
/// integers [rows, width] (F32 on the host; on a GPU I8, I4 for 4 bits), s [rows, 1] F32.
std::vector<Tensor> int8Rows(const Tensor& x, int64_t bits = 8);
/// int8Rows into q ([rows, width] I8, I4 or F32) and s ([rows, 1] F32). `bits` (8 or 4; 0: from
/// q, 4 for I4 and 8 otherwise) lets I8 and F32 hold 4-bit codes too; an I4 q takes only 4.
void int8RowsInto(const Tensor& x, const Tensor& q, const Tensor& s, int64_t bits = 0);
/// int8Rows of modulatedNorm's rows of x (F32, not rounded to BF16) in one pass into q and s;
/// with y also modulatedNorm's values. `bits` as int8RowsInto's.
void modulatedInt8RowsInto(const Tensor& x, const Tensor& w, const Tensor& shift, const Tensor& scale,
                           const Tensor& map, double eps, const std::optional<Tensor>& y, const Tensor& q,
                           const Tensor& s, bool centered = false, int64_t bits = 0);

/// The INT8 grid a 4-bit W4A8 weight stands for (ComfyUI's asym_w4a8_int8, as comfy_kitchen's
/// _dequant_int4_grouped_to_int8): packed [rows, in / 2] I8 holds two codes a byte (the even column
/// in the low nibble); a code stands for levels[code] ([16] F32) times its group's scale
/// scales[row, column / group] ([rows, in / group] F32), one f32 product, rounded half to even and
/// clamped to [-127, 127]: [rows, in] I8, where packed is (on a GPU in one kernel). So a 4-bit
/// weight can stay at 4 bits and give its INT8 grid to a product when one needs it.
Tensor w4a8Grid(const Tensor& packed, const Tensor& scales, const Tensor& levels, int64_t group);

/// The patches of x ([c, h, w]) under a kh x kw window (stride 1, pad zeros around) for output
/// rows r0 to r1: [c kh kw, (r1 - r0) ow] of dtype, entry (ch kh kw + i kw + j, (oy - r0) ow + ox)
/// = x[ch, oy + i - pad, ox + j - pad], ow = w + 2 pad - kw + 1.
Tensor patchRows(const Tensor& x, int64_t kh, int64_t kw, int64_t pad, int64_t r0, int64_t r1,
                 DType dtype = DType::F32);
/// w ([o, c kh kw]) times patchRows(x): the convolution, [o, oh ow] channel first, F32, not yet
/// computed (a deferred product, Lazy::Product), so that what is chained on it (bias [o, 1],
/// activation, residual add, cast) runs in the product's store when it is evaluated:
/// - on the CPU (in F32, whatever `compute` says) a tile of o rows by a band of pixels at a time:
///   the band's patches times w (sgemm, matmul's order of additions, so matmul's bits), then the
///   chain over the tile's rows while it is in cache; the output is the only allocation.
/// - on a GPU on NVIDIA's matrix cores (BF16, 3 x 3, pad 1, w a multiple of 8) the chain is
///   generated into the implicit product's store (its accumulators, never stored); elsewhere on a
///   GPU the product is computed first, then the chain as one generated kernel.
/// Computed first (correct, not fused) also: the product broadcast to a larger shape, two
/// products in one expression, or a product with one pixel. A reduction or reshape needs eval()
/// first (Lazy has none): the product and its chain are fused, what follows runs on the result.
Lazy lazyConv(const Tensor& w, const Tensor& x, int64_t kh, int64_t kw, int64_t pad, DType compute);
/// The 3 x 3 x 3 convolution of frames 1 .. n of x ([n + 2, c, h, w]) by w ([o, 27 c], inputs in
/// (time, channel, height, width) order), zeros around in space: [n, o, h w] F32, not yet
/// computed, its chain fused per frame as lazyConv's: on the CPU each tile is one frame's o rows
/// (frames t - 1 .. t + 1 as 3 c channels, a lazyConv's bits); on NVIDIA's matrix cores (width a
/// multiple of 8) one implicit product of n images with the chain in its store; on other GPUs a
/// lazyConv a frame in F32, computed first.
Lazy lazyConv3(const Tensor& w, const Tensor& x);
/// PixelNorm of x ([frames, c, pixels]): each pixel's c values over their RMS (eps), then SiLU
/// when act, into out (x's shape; out may be x).
void pixelNormInto(const Tensor& x, double eps, bool act, const Tensor& out);

// A language model's step on a GPU: device addresses of f32 data on g. Each checks its sizes on
// the host (an Error without launching) and queues one kernel on g's stream.

/// Each of `rows` rows' largest logit's token (the first of equals; NaN never wins; a row of
/// NaN gives 0), as f32 into top[r]. Row r is logits + r stride, or with `indirect` logits +
/// blocks[r] stride (blocks: rows f32 row indexes of the head's blocks).
void argmaxInto(const gizhw::gpu::Gpu& g, int64_t rows, int64_t vocab, int64_t stride, bool indirect, uint64_t top,
                uint64_t logits, uint64_t blocks);
/// Sampling candidates of the rows (read as argmaxInto reads them) into cand (rows of
/// CANDIDATE_ROW floats): thread t of 256 reads tokens t, t + 256, ... and keeps its TOP_EACH
/// largest (the first of equals, NaN never), largest first, as (value, token) pairs at pair
/// t TOP_EACH + k; unfilled pairs are (-inf, -1).
void candidatesInto(const gizhw::gpu::Gpu& g, int64_t rows, int64_t vocab, int64_t stride, bool indirect,
                    uint64_t cand, uint64_t logits, uint64_t blocks);
/// y[i] = (add ? y[i] + : ) the sum of p[k total + i] over the `splits` parts, in part order.
void splitSumInto(const gizhw::gpu::Gpu& g, uint64_t y, uint64_t p, int64_t total, int64_t splits, bool add);
/// y ([rows, width]) = row r of x (at x + r stride + offset) over its RMS (eps) times w
/// ([width]); with `rotate`, then rotate-half: value j < width / 2 with j + width / 2 by the
/// cos and sin of d ([positions, width]: width / 2 cos, then width / 2 sin) at position map[r]
/// (map: rows f32 indexes; 0: position r).
void normRotateInto(const gizhw::gpu::Gpu& g, int64_t rows, int64_t width, double eps, bool rotate, int64_t stride,
                    int64_t offset, uint64_t y, uint64_t x, uint64_t w, uint64_t d, uint64_t map);
/// SwiGLU rows: p holds nUp split parts [nUp, rows, 2 ffn] (each row its gate, then its up),
/// added in part order; y ([rows, ffn]) = silu(gate) up. With d nonzero, d ([rows, ffn], ffn a
/// multiple of 256) also gets y's rows times the regular Hadamard matrix over 16 (as int8Rows
/// rotates), the input a ConvRot INT8 down projection takes.
void siluMulRotatedInto(const gizhw::gpu::Gpu& g, int64_t rows, int64_t ffn, int64_t nUp, uint64_t y, uint64_t p,
                        uint64_t d);
/// In place on `rows` rows of `width` BF16 values at `at` (`stride` values apart): each row over
/// its RMS across the whole row (eps) times w ([width] F32 on gpu); then with cos and sin (one
/// each, [rows, width / 2] F32 on gpu) each head of `head` values turned by split halves: value
/// d < head / 2 with d + head / 2 by the angle of pair h head / 2 + d.
void rowNormRopeInto(const gizhw::gpu::Gpu& gpu, uint64_t at, int64_t stride, int64_t rows, int64_t width,
                     int64_t head, const Tensor& w, double eps, const std::vector<Tensor>& cos = {},
                     const std::vector<Tensor>& sin = {});

}  // namespace gizml::netops
