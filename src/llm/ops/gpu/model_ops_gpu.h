#pragma once
// The GPU implementations of llm/ops (kernels in model_ops.cu.inc): each checks what the kernel
// relies on and queues it on the operands' GPU stream. The callers in llm/ops have checked the
// sizes and that every operand is on that GPU.
#include <gizml/tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gizml::llm::ops::gpu {

/// A forward pass begins on the calling thread: the small arrays its operations copy up (rows'
/// places, positions, DeltaNet runs) are copied afresh, not taken from an earlier pass.
void beginPass();

using tensor::Tensor;

/// A layer's elementwise steps in place on x's n values (gz_lm_elementwise), the tensor layer's
/// formulas without building an expression each call: x += y; x = act(x) y; x = x sigmoid(y);
/// x = tanh(x / s) s; x = x s; x += y sigmoid(gate[row]) over rows of `width`.
enum class Elementwise { Add, SiluMul, GeluMul, SigmoidGate, Softcap, Scale, AddGated };
void elementwise(Elementwise op, const Tensor& x, const Tensor* y = nullptr, float s = 0,
                 const Tensor* gate = nullptr, int64_t width = 1);

/// The kernels' CUDA source (the compile tests build it for each architecture).
const std::string& kernelSource();

/// The kind of stored element the kernels read: 0 F32, 1 F16, 2 BF16; an Error naming `op` for
/// another dtype.
int elementKind(const char* op, DType dtype);

/// x = 0 (contiguous).
void zero(const Tensor& x);

/// out = rms norm of x's rows times w; with `add` (as x), x += add first, in the same launch.
void rmsNorm(const Tensor& x, const Tensor& w, float eps, const Tensor& out, int64_t rows, int64_t width,
             const Tensor* add = nullptr);
/// Rotate-half RoPE in place on q ([rows, qHeads headDim]) and k ([rows, kHeads headDim]), one
/// launch, with `invFreq` ([half]) from `start`, or at `positions` (I32 [rows, half] or [rows]: a
/// position a row; on q's GPU or in host memory) when not null.
void rope(const Tensor& q, const Tensor& k, int64_t rows, int64_t qHeads, int64_t kHeads, int64_t headDim,
          const Tensor& invFreq, int64_t start, const Tensor* positions);

/// y [n, out] = x [n, in] W^T (+ bias [out] unless it has no elements) over group-format rows
/// `weights` (U8, out x rowBytes), on the tensor cores: x's rows scaled to F16 by powers of two,
/// the weights decoded to F16 without the tensor's base, F32 sums. Each row's outputs are the same
/// bits whatever rows are beside it.
void groupMatmul(const Tensor& x, const Tensor& weights, const Tensor& bias, const Tensor& y, int64_t n, int64_t out,
                 int64_t in, int64_t rowBytes, int bits, int group, float base);
/// 16-bit weight rows in the layout of halfMatmul: F16 rows [out, in rounded up to even, the
/// last zero], each row scaled by a power of two (its largest magnitude in [2^13, 2^14)), and
/// those powers [out] (F32).
struct HalfWeights {
  Tensor rows, scales;
};
/// The stored F16 or BF16 rows [out, in] so laid out (BF16 values keep their bits but for those
/// below 2^-27 of their row's largest, which F16 holds only in part).
HalfWeights halfWeights(const Tensor& stored, int64_t out, int64_t in);
/// y = x W^T (+ bias) over such rows on the tensor cores, as groupMatmul but for x's rows kept to
/// 22 bits (their F16 and what F16 left of them, two products): f32's rounding, not F16's.
void halfMatmul(const Tensor& x, const HalfWeights& weights, const Tensor& bias, const Tensor& y, int64_t n,
                int64_t out, int64_t in);
/// The same over F32 rows `weights` ([out, in]) with f32 sums, one warp a weight row.
void floatMatmul(const Tensor& x, const Tensor& weights, const Tensor& bias, const Tensor& y, int64_t n, int64_t out,
                 int64_t in);

/// One layer's pages on the GPU: keys [pages, kvHeads, headDim, P] and values [pages, kvHeads, P,
/// headDim] of F32, F16 or BF16, or either as codes of keyBits / valueBits bits with their ranges
/// (cpu/kv_attention.h's layout: a key column's positions and a value row's dimensions packed
/// low bits first, an F16 scale and offset per head and token, [pages, kvHeads, P, 2]).
struct KvPages {
  Tensor keys, values;
  int64_t kvHeads, headDim, pageTokens;
  Tensor keyRanges = {}, valueRanges = {};
  int keyBits = 0, valueBits = 0;
};
/// Where the rows of a store or an attention are: row r at position positions[r] of the sequence
/// whose page table (int32 pages, on the GPU) is at device address tables[r]. Rows of several
/// sequences go in one launch; the same places asked again (the next layer's) are not copied
/// to the GPU again.
struct RowPlaces {
  std::vector<uint64_t> tables;
  std::vector<int32_t> positions;
};
/// How the tensor-core products read a layer's rows on the GPU (Linear::productRows): group rows
/// as stored (groupMatmul's rowBytes, bits, group and base), 16-bit rows as halfWeights made them
/// (rows and scales), or F32 rows (floatMatmul, no tensor cores).
struct ProductRows {
  enum class Kind { Group, Half, Float } kind = Kind::Float;
  Tensor rows, scales;
  int64_t rowBytes = 0;
  int bits = 0, group = 0;
  float base = 0;
};

/// One layer of products(): its rows (not F32), its bias (none: no elements) and its output y
/// [n, out].
struct LayerProduct {
  ProductRows rows;
  Tensor bias, y;
  int64_t out;
};
/// y = x W^T (+ bias) of every layer over the same rows x ([n, in] F32), made F16 once for all
/// (with what F16 left where a 16-bit layer reads it): each y the bits of groupMatmul or
/// halfMatmul alone, one conversion instead of one a layer (q, k and v; gate and up).
void products(const Tensor& x, const std::vector<LayerProduct>& layers, int64_t n, int64_t in);

/// One projection of a MoE layer's experts on the GPU, for moeProducts: a table of each expert's
/// rows (their address, a 16-bit layer's scales, a group layer's base), all in one format.
struct ExpertRows {
  Tensor table;  // U8
  bool half = false;
  int64_t count = 0, rowBytes = 0;
  int bits = 0, group = 0;
};
/// The table of the experts' layers, or nullopt unless all are group rows of one format or all
/// 16-bit rows.
std::optional<ExpertRows> expertRows(const std::vector<ProductRows>& experts);
/// Rows routed by the router's scores [rows, experts] on the device (gz_lm_moe_route, as
/// cpu::routeTopK but for expf): pair r topK + k is row r's k-th expert in ascending order (I32),
/// with its weight; with `tiles`, the pairs grouped by expert in tiles of 16 or 64 rows
/// (gz_lm_moe_tiles).
struct MoeRoutes {
  Tensor ids, weights, tiles;
  int64_t rows = 0, topK = 0, maxTiles = 0;
  int64_t tileRows = 16;  // rows a tile: 64 where the experts average 32 pairs or more, else 16
};
MoeRoutes moeRoute(const Tensor& scores, int64_t rows, int64_t experts, int64_t topK, bool tiles);
/// The most experts moeRoute takes (gz_lm_moe_tiles keeps a count of each in shared memory).
inline constexpr int64_t kMostRoutedExperts = 1024;
/// For each product, y [pairs, out] = each pair's activation row through its expert's rows: row
/// pair / perRow of x [*, in] (perRow topK: a token's row; 1: the pair's own), x made F16 once
/// for all of them. The bits of the dense product of that expert over that row.
struct ExpertProduct {
  const ExpertRows* rows;
  Tensor y;
};
void moeProducts(const Tensor& x, const std::vector<ExpertProduct>& products, const MoeRoutes& r, int64_t perRow,
                 int64_t out, int64_t in);
/// out [rows, width] = the weighted sum of each row's pairs of y [pairs, width], in pair order.
void moeCombine(const Tensor& y, const MoeRoutes& r, const Tensor& out, int64_t width);

/// Gated DeltaNet's token mixing of runs of a pass's rows (cpu::delta::mix's steps, the delta rule
/// token by token): each run's rows of qkv [n, channels], b and a [n, valueHeads] into the same
/// rows of o [n, valueHeads valueDim], advancing its conv [kernel - 1, channels] and memory
/// [valueHeads, keyDim, valueDim]. Each kernel is one launch for all the runs, which find their
/// rows and states through a table copied up once a pass.
struct DeltaNetRuns {
  int64_t keyHeads, valueHeads, keyDim, valueDim, kernel;
  Tensor qkv, b, a, taps, decayRate, dtBias, o;
  struct Run {
    int64_t first, rows;
    Tensor conv, memory;
  };
  std::vector<Run> runs;  // each with rows, in any order
};
void deltaNetMix(const DeltaNetRuns& r);
/// Each run of n values of o: rmsnorm(o) w silu(z).
void gatedNorm(const Tensor& o, const Tensor& z, const Tensor& w, float eps, int64_t runs, int64_t n);
/// out row ids[i] += weights[i] y row i (ids distinct).
void addWeightedRows(const Tensor& out, const std::vector<int64_t>& ids, const std::vector<float>& weights,
                     const Tensor& y, int64_t width);

/// Edits of logit values in place (gz_lm_penalize): the F32 logit at device address at[i]
/// (distinct, any rows of one GPU) divided by repetition[i] where positive, else multiplied, less
/// minus[i], plus bias[biasStart[i] .. biasStart[i + 1]) in order.
struct LogitEdits {
  std::vector<uint64_t> at;
  std::vector<float> repetition, minus;
  std::vector<int32_t> biasStart{0};
  std::vector<float> bias;
};
/// The edits on the GPU `on` is on: one copy up and one launch.
void penalize(const Tensor& on, const LogitEdits& edits);
/// A row of `vocab` F32 logits at device address `row` and what its grammar allows: token i where
/// bit i % 32 of words[i / 32] is set (those clear become -inf, those set keep their value, or
/// become 0 with `zero`).
struct MaskedRow {
  uint64_t row;
  const std::vector<uint32_t>* words;
  bool zero;
};
/// The rows (on the GPU `on` is on) as their grammars allow them: one copy up (the bits of one
/// grammar state once) and one launch.
void maskRows(const Tensor& on, const std::vector<MaskedRow>& rows, int64_t vocab);

/// The rows' keys and values k, v ([rows, kvHeads headDim]) into their places; into codes with
/// the CPU's bits (cpu/kv_codes.h), each head's vector rotated first where headDim is a power of two.
void storeKeysValues(const KvPages& kv, const RowPlaces& places, const Tensor& k, const Tensor& v);
/// Causal attention of each row q ([rows, heads headDim]) at its place over its sequence's pages
/// up to there (window 0: every earlier position; keyEnd > 0: none at or past keyEnd, padding), in
/// chunks of 256 positions merged in order (model_ops.cu.inc), into context (as q).
void attention(const KvPages& kv, const RowPlaces& places, const Tensor& q, const Tensor& context, int64_t heads,
               float scale, int64_t window, int64_t keyEnd = 0);

}  // namespace gizml::llm::ops::gpu
