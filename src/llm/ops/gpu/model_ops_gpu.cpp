#include "llm/ops/gpu/model_ops_gpu.h"

#include <gizml/error.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <string>

#include "cpu/kv_attention.h"
#include "tensor/gpu/codegen.h"
#include "tensor/gpu/tensor_ops.h"

namespace gizml::llm::ops::gpu {
namespace {

// The kernels' sizes, given to their source as macros (model_ops.cu.inc) so that both sides agree.
constexpr int64_t kRowsAWarp = 4;      // GZ_LM_ROWS: activation rows a warp of the f32 product takes
constexpr int64_t kOutputsABlock = 16; // GZ_LM_TN: outputs a block of the tensor-core products
constexpr int64_t kMaxQueries = 2048;  // GZ_LM_MAX_QUERIES: query heads x headDim a KV head's block holds
constexpr int64_t kChunk = 256;        // GZ_LM_CHUNK: positions a block of attention reads
constexpr int64_t kAttentionPairs = 16; // GZ_LM_PAIRS: (row, query head) pairs of a tensor-core attention tile
constexpr int64_t kMaxDeltaKey = 256;  // GZ_LM_DELTA_MAX_KEY: a DeltaNet key head's values the chunked rule holds
constexpr int64_t kDeltaChunk = 64;    // GZ_LM_DELTA_CHUNK: rows of a chunk of the delta rule (the CPU's)
constexpr int64_t kDeltaColumns = 32;  // GZ_LM_DELTA_COLUMNS: state columns a carry block holds

}  // namespace

const std::string& kernelSource() {
  static const std::string text = gpuops::preludeSource() + gpuops::mmaSource() +
                                  "#define GZ_LM_ROWS " + std::to_string(kRowsAWarp) + "\n#define GZ_LM_TN " +
                                  std::to_string(kOutputsABlock) + "\n#define GZ_LM_MAX_QUERIES " +
                                  std::to_string(kMaxQueries) + "\n#define GZ_LM_CHUNK " + std::to_string(kChunk) +
                                  "\n#define GZ_LM_MOE_EXPERTS " + std::to_string(kMostRoutedExperts) +
                                  "\n#define GZ_LM_MAX_CODED " + std::to_string(cpu::kMaxCodedHead) +
                                  "\n#define GZ_LM_DELTA_MAX_KEY " + std::to_string(kMaxDeltaKey) +
                                  "\n#define GZ_LM_DELTA_CHUNK " + std::to_string(kDeltaChunk) +
                                  "\n#define GZ_LM_DELTA_COLUMNS " + std::to_string(kDeltaColumns) +
                                  "\n#define GZ_LM_PAIRS " + std::to_string(kAttentionPairs) + "\n" +
#include "llm/ops/gpu/model_ops.cu.inc"
#include "llm/ops/gpu/delta_net.cu.inc"
#include "llm/ops/gpu/attention_mma.cu.inc"
#include "llm/ops/gpu/kv_codes.cu.inc"
      ;
  return text;
}

namespace {

using gizhw::gpu::Dim3;
using gizhw::gpu::Gpu;

template <class... Args>
void launch(const Gpu& g, const char* name, Dim3 grid, unsigned threads, Args... args) {
  void* params[] = {static_cast<void*>(&args)...};
  const size_t sizes[] = {sizeof(Args)...};  // (a step recorded on HIP keeps the arguments by these)
  g.staticKernel(kernelSource(), name).launch(grid, Dim3{threads, 1, 1}, 0, g.stream(), params, sizes);
}

constexpr unsigned kThreads = 256;
constexpr int64_t kMaxHead = 256;      // the attention kernels' threads: one a dimension
// Attention's partial sums at once: 64 MiB, a band of rows at a time (one row's, when more).
constexpr int64_t kPartFloats = int64_t{16} << 20;
constexpr int64_t kMaxGrid = 65535;    // a grid's y and z limit

// A grid-stride grid for `work` items, at most 32 blocks per multiprocessor.
Dim3 strideGrid(const Gpu& g, int64_t work) {
  const int64_t cap = std::max<int64_t>(int64_t{g.properties().multiprocessors} * 32, 1);
  return Dim3{static_cast<unsigned>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, cap)), 1, 1};
}

uint64_t at(const Tensor& t) { return gpuops::address(t); }
uint64_t orNull(const Tensor& t) { return t.ndim() > 0 && t.numel() > 0 ? gpuops::address(t) : 0; }

// Small host arrays on a GPU, copied once a pass: the calling thread keeps the copies made since
// its pass began (beginPass) and gives the same bytes asked again for the same GPU (each layer of
// a pass asks for its rows' places) the copy already made, up to the last kKeptCopies of them.
// Not across passes: then each pass of a shape makes the same copies whatever their bytes, as a
// recorded step (gizhw::gpu::StepGraph) expects. Callers use the address at once, and the
// allocator reuses memory only after the work queued before.
constexpr size_t kKeptCopies = 8;
struct Copy {
  Gpu gpu;
  std::vector<uint8_t> bytes;
  gizhw::gpu::Buffer buffer;
};
thread_local std::deque<Copy> passCopies;  // the most recent first

uint64_t copiedOnce(const Gpu& g, const std::vector<uint8_t>& bytes) {
  std::deque<Copy>& kept = passCopies;
  const auto same = std::find_if(kept.begin(), kept.end(), [&](const Copy& c) { return c.gpu == g && c.bytes == bytes; });
  if (same != kept.end()) return same->buffer.address();
  gizhw::gpu::Buffer buffer = g.allocate(bytes.size());
  // A replayed step (gizhw::gpu::StepGraph) hands out its recorded memory again, which an older
  // copy may name: that copy's bytes are about to be replaced.
  std::erase_if(kept, [&](const Copy& c) { return c.gpu == g && c.buffer.address() == buffer.address(); });
  g.copyToDevice(buffer.address(), bytes.data(), bytes.size(), g.stream());
  kept.push_front({g, bytes, buffer});
  if (kept.size() > kKeptCopies) kept.pop_back();
  return buffer.address();
}

// The bytes of `values`, for copiedOnce.
template <class T>
std::vector<uint8_t> bytesOf(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// A RowPlaces on the GPU: the tables (8 bytes a row), then the positions (4 a row).
struct PlacesOnGpu {
  uint64_t tables, positions;
  int64_t rows;
};
PlacesOnGpu placedRows(const Gpu& g, const RowPlaces& places) {
  const size_t rows = places.positions.size();
  check(places.tables.size() == rows, "cachedAttention: a page table for each row's position expected");
  std::vector<uint8_t> bytes(rows * (sizeof(uint64_t) + sizeof(int32_t)));
  std::memcpy(bytes.data(), places.tables.data(), rows * sizeof(uint64_t));
  std::memcpy(bytes.data() + rows * sizeof(uint64_t), places.positions.data(), rows * sizeof(int32_t));
  const uint64_t base = copiedOnce(g, bytes);
  return {base, base + rows * sizeof(uint64_t), static_cast<int64_t>(rows)};
}

// Launches of the float matrix kernel: a block of 8 warps, one weight row each, over the activation
// rows in bands of kRowsAWarp per grid row, at most kMaxGrid bands a launch.
template <class Launch>
void overBands(int64_t n, int64_t out, const Launch& launchBand) {
  const auto blocks = static_cast<unsigned>((out + 7) / 8);
  for (int64_t first = 0; first < n; first += kMaxGrid * kRowsAWarp) {
    const int64_t rows = std::min(n - first, kMaxGrid * kRowsAWarp);
    launchBand(first, rows, Dim3{blocks, static_cast<unsigned>((rows + kRowsAWarp - 1) / kRowsAWarp), 1});
  }
}

}  // namespace

void beginPass() { passCopies.clear(); }

int elementKind(const char* op, DType dtype) {
  if (dtype == DType::F32) return 0;
  if (dtype == DType::F16) return 1;
  if (dtype == DType::BF16) return 2;
  throw Error(std::string(op) + ": " + dtypeName(dtype) + " elements are not read on a GPU (F32, F16, BF16)");
}

void zero(const Tensor& x) {
  const Gpu g = gpuops::gpuOf(x);
  g.fill(at(x), 0, dtypeBytes(x.dtype(), x.numel()), g.stream());
}

void elementwise(Elementwise op, const Tensor& x, const Tensor* y, float s, const Tensor* gate, int64_t width) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const Gpu g = gpuops::gpuOf(x);
  launch(g, "gz_lm_elementwise", strideGrid(g, n), kThreads, at(x), y ? at(*y) : uint64_t{0},
         gate ? at(*gate) : uint64_t{0}, n, width, static_cast<int>(op), s);
}

void rmsNorm(const Tensor& x, const Tensor& w, float eps, const Tensor& out, int64_t rows, int64_t width,
             const Tensor* add) {
  check(rows < (int64_t{1} << 31), "rmsNorm: too many rows for one launch");
  launch(gpuops::gpuOf(x), "gz_lm_rms_norm", Dim3{static_cast<unsigned>(rows), 1, 1}, kThreads, at(out), at(x),
         add ? at(*add) : uint64_t{0}, at(w), width, eps);
}

void rope(const Tensor& q, const Tensor& k, int64_t rows, int64_t qHeads, int64_t kHeads, int64_t headDim,
          const Tensor& invFreq, int64_t start, const Tensor* positions) {
  const int64_t half = invFreq.numel();
  if (rows == 0 || half == 0) return;
  const Gpu g = gpuops::gpuOf(q);
  uint64_t placed = 0;
  if (positions && positions->onGpu()) {
    placed = at(*positions);
  } else if (positions) {
    // Host positions (multimodal RoPE's, or a batch's rows): every layer of the pass reads one copy.
    const auto* first = reinterpret_cast<const uint8_t*>(positions->data<int32_t>());
    placed = copiedOnce(g, std::vector<uint8_t>(first, first + positions->numel() * sizeof(int32_t)));
  }
  const int64_t perRow = positions ? positions->numel() / rows : 0;
  launch(g, "gz_lm_rope", strideGrid(g, rows * (qHeads + kHeads) * half), kThreads, at(q), at(k), rows, qHeads, kHeads,
         headDim, at(invFreq), half, start, placed, perRow);
}

namespace {

// The activation rows x [n, in] as scaled F16 (gz_lm_half_rows; with `low`, what F16 left of
// them too), then kernel16 (n <= 16) or kernel64 over them: tiles of 16 rows for a few rows and
// of 64 for more, the same bits a row in both. `weights` are the kernel's own arguments after
// (y, xh, xl, scale, bias, n, out, in).
// The F16 rows' width: `in` made even (a zero after an odd row), so that pairs of F16 load as
// aligned words and never reach into the next row.
int64_t evenWidth(int64_t in) { return in + (in & 1); }

// Activation rows as the tensor-core products read them (gz_lm_half_rows): F16 [n, width], with
// `low` what F16 left of them too, and a power of two a row.
struct HalfRows {
  Tensor half, rest, scale;
  int64_t width;
};
HalfRows halfRowsOf(const Gpu& g, const Tensor& x, int64_t n, int64_t in, bool low) {
  const int64_t width = evenWidth(in);
  HalfRows h{gpuops::empty({n, width}, DType::F16, g.device()),
             low ? gpuops::empty({n, width}, DType::F16, g.device()) : Tensor(),
             gpuops::empty({n}, DType::F32, g.device()), width};
  launch(g, "gz_lm_half_rows", Dim3{static_cast<unsigned>(n), 1, 1}, kThreads, at(h.half), orNull(h.rest),
         at(h.scale), at(x), in, width, 0);
  return h;
}

// y = x W^T (+ bias) of one layer over rows h made of x (with what F16 left, h.rest, where `low`).
template <class... Weights>
void launchProduct(const Gpu& g, const HalfRows& h, const char* kernel16, const char* kernel64, bool low,
                   const Tensor& bias, const Tensor& y, int64_t n, int64_t out, Weights... weights) {
  const int64_t width = h.width;
  const Tensor &half = h.half, &rest = h.rest, &scale = h.scale;
  const int64_t tile = n <= 16 ? 16 : 64;
  const auto columns = static_cast<unsigned>((out + kOutputsABlock - 1) / kOutputsABlock);
  for (int64_t first = 0; first < n; first += kMaxGrid * tile) {
    const int64_t rows = std::min(n - first, kMaxGrid * tile);
    launch(g, tile == 16 ? kernel16 : kernel64, Dim3{columns, static_cast<unsigned>((rows + tile - 1) / tile), 1},
           kThreads, at(y) + static_cast<uint64_t>(first * out) * 4, at(half) + static_cast<uint64_t>(first * width) * 2,
           low ? at(rest) + static_cast<uint64_t>(first * width) * 2 : uint64_t{0},
           at(scale) + static_cast<uint64_t>(first) * 4, orNull(bias), rows, out, width, weights...);
  }
}

}  // namespace

void groupMatmul(const Tensor& x, const Tensor& weights, const Tensor& bias, const Tensor& y, int64_t n, int64_t out,
                 int64_t in, int64_t rowBytes, int bits, int group, float base) {
  products(x, {{{ProductRows::Kind::Group, weights, {}, rowBytes, bits, group, base}, bias, y, out}}, n, in);
}

void products(const Tensor& x, const std::vector<LayerProduct>& layers, int64_t n, int64_t in) {
  if (n == 0 || layers.empty()) return;
  check(n < (int64_t{1} << 31), "Linear: too many rows for one launch");
  const Gpu g = gpuops::gpuOf(x);
  // The F16 rows are the same with or without what F16 left of them, which 16-bit rows read too.
  const bool low = std::any_of(layers.begin(), layers.end(),
                               [](const LayerProduct& l) { return l.rows.kind == ProductRows::Kind::Half; });
  const HalfRows h = halfRowsOf(g, x, n, in, low);
  for (const LayerProduct& l : layers) {
    const ProductRows& p = l.rows;
    check(p.kind != ProductRows::Kind::Float, "products: F32 rows are not multiplied on the tensor cores");
    if (p.kind == ProductRows::Kind::Half)
      launchProduct(g, h, "gz_lm_half_mma16", "gz_lm_half_mma64", true, l.bias, l.y, n, l.out, at(p.rows),
                    at(p.scales));
    else
      launchProduct(g, h, "gz_lm_group_mma16", "gz_lm_group_mma64", false, l.bias, l.y, n, l.out, at(p.rows),
                    p.rowBytes, p.bits, p.group, p.base);
  }
}

HalfWeights halfWeights(const Tensor& stored, int64_t out, int64_t in) {
  check(out < (int64_t{1} << 31), "Linear: too many rows for one launch");
  const Gpu g = gpuops::gpuOf(stored);
  const int64_t width = evenWidth(in);
  HalfWeights w{gpuops::empty({out, width}, DType::F16, g.device()), gpuops::empty({out}, DType::F32, g.device())};
  if (out > 0)
    launch(g, "gz_lm_half_rows", Dim3{static_cast<unsigned>(out), 1, 1}, kThreads, at(w.rows), uint64_t{0},
           at(w.scales), at(stored), in, width, elementKind("Linear", stored.dtype()));
  return w;
}

void halfMatmul(const Tensor& x, const HalfWeights& weights, const Tensor& bias, const Tensor& y, int64_t n,
                int64_t out, int64_t in) {
  products(x, {{{ProductRows::Kind::Half, weights.rows, weights.scales}, bias, y, out}}, n, in);
}

void floatMatmul(const Tensor& x, const Tensor& weights, const Tensor& bias, const Tensor& y, int64_t n, int64_t out,
                 int64_t in) {
  check(weights.dtype() == DType::F32, "Linear: the f32 product reads F32 rows, not " +
                                           std::string(dtypeName(weights.dtype())));
  const Gpu g = gpuops::gpuOf(x);
  overBands(n, out, [&](int64_t first, int64_t rows, Dim3 grid) {
    launch(g, "gz_lm_float_matmul", grid, kThreads, at(y) + static_cast<uint64_t>(first * out) * 4,
           at(x) + static_cast<uint64_t>(first * in) * 4, at(weights), orNull(bias), rows, out, in);
  });
}

std::optional<ExpertRows> expertRows(const std::vector<ProductRows>& experts) {
  if (experts.empty()) return std::nullopt;
  const ProductRows& first = experts.front();
  const auto count = static_cast<int64_t>(experts.size());
  std::vector<uint64_t> addresses(2 * experts.size());
  std::vector<float> bases;
  for (size_t e = 0; e < experts.size(); ++e) {
    const ProductRows& p = experts[e];
    if (p.kind == ProductRows::Kind::Float || p.kind != first.kind || p.rowBytes != first.rowBytes ||
        p.bits != first.bits || p.group != first.group || p.rows.ndim() == 0 ||
        gpuops::gpuOf(p.rows) != gpuops::gpuOf(first.rows))
      return std::nullopt;
    addresses[e] = at(p.rows);
    addresses[experts.size() + e] = orNull(p.scales);
    bases.push_back(p.base);
  }
  std::vector<uint8_t> bytes(addresses.size() * sizeof(uint64_t) + bases.size() * sizeof(float));
  std::memcpy(bytes.data(), addresses.data(), addresses.size() * sizeof(uint64_t));
  std::memcpy(bytes.data() + addresses.size() * sizeof(uint64_t), bases.data(), bases.size() * sizeof(float));
  const Gpu g = gpuops::gpuOf(first.rows);
  ExpertRows rows{gpuops::empty({static_cast<int64_t>(bytes.size())}, DType::U8, g.device()),
                  first.kind == ProductRows::Kind::Half, count, first.rowBytes, first.bits, first.group};
  g.copyToDevice(at(rows.table), bytes.data(), bytes.size(), g.stream());
  return rows;
}

MoeRoutes moeRoute(const Tensor& scores, int64_t rows, int64_t experts, int64_t topK, bool tiles) {
  check(experts <= kMostRoutedExperts, "MoE: the device's routing takes at most " + std::to_string(kMostRoutedExperts) +
                                          " experts, not " + std::to_string(experts));
  check(rows * topK < (int64_t{1} << 31), "MoE: too many rows for one launch");
  const Gpu g = gpuops::gpuOf(scores);
  const int64_t pairs = rows * topK;
  // Tiles of 64 rows where the experts average 32 pairs or more (a prompt), else of 16.
  const int64_t tileRows = pairs >= 32 * experts ? 64 : 16;
  MoeRoutes r{gpuops::empty({pairs}, DType::I32, g.device()), gpuops::empty({pairs}, DType::F32, g.device()), {},
              rows, topK, (pairs + tileRows - 1) / tileRows + std::min(experts, pairs), tileRows};
  if (rows == 0) return r;
  launch(g, "gz_lm_moe_route", Dim3{static_cast<unsigned>((rows + kThreads - 1) / kThreads), 1, 1}, kThreads,
         at(r.ids), at(r.weights), at(scores), rows, experts, topK);
  if (tiles) {
    r.tiles = gpuops::empty({r.maxTiles * (1 + tileRows)}, DType::I32, g.device());
    launch(g, "gz_lm_moe_tiles", Dim3{1, 1, 1}, kThreads, at(r.tiles), at(r.ids), pairs, experts, r.maxTiles,
           tileRows);
  }
  return r;
}

void moeProducts(const Tensor& x, const std::vector<ExpertProduct>& products, const MoeRoutes& r, int64_t perRow,
                 int64_t out, int64_t in) {
  if (r.rows == 0 || products.empty()) return;
  check(r.maxTiles < 65536, "MoE: too many rows for one launch");
  const Gpu g = gpuops::gpuOf(x);
  // The F16 rows are the same with or without what F16 left of them, which 16-bit rows read too.
  const bool low = std::any_of(products.begin(), products.end(), [](const ExpertProduct& p) { return p.rows->half; });
  const HalfRows h = halfRowsOf(g, x, x.numel() / in, in, low);
  const Dim3 grid{static_cast<unsigned>((out + kOutputsABlock - 1) / kOutputsABlock), static_cast<unsigned>(r.maxTiles), 1};
  for (const ExpertProduct& p : products) {
    const ExpertRows& w = *p.rows;
    const bool wide = r.tileRows == 64;
    if (w.half)
      launch(g, wide ? "gz_lm_moe_half_mma64" : "gz_lm_moe_half_mma16", grid, kThreads, at(p.y), at(h.half), at(h.rest), at(h.scale), at(w.table),
             w.count, at(r.tiles), r.maxTiles, perRow, out, h.width);
    else
      launch(g, wide ? "gz_lm_moe_group_mma64" : "gz_lm_moe_group_mma16", grid, kThreads, at(p.y), at(h.half), at(h.scale), at(w.table), w.count,
             at(r.tiles), r.maxTiles, perRow, out, h.width, w.rowBytes, w.bits, w.group);
  }
}

void moeCombine(const Tensor& y, const MoeRoutes& r, const Tensor& out, int64_t width) {
  const Gpu g = gpuops::gpuOf(y);
  launch(g, "gz_lm_moe_combine", strideGrid(g, r.rows * width), kThreads, at(out), at(y), at(r.weights), r.rows,
         r.topK, width);
}

namespace {

// The runs of a Gated DeltaNet mix on the GPU (GzLmDeltaRuns in model_ops.cu.inc reads it): each
// run's conv and memory addresses, first row, packed start and row count, then each packed row's
// run. Packed rows are the runs' rows one after another (the order of mixed, beta and g).
std::vector<uint8_t> deltaRunTable(const std::vector<DeltaNetRuns::Run>& runs, int64_t packed) {
  const size_t count = runs.size();
  std::vector<uint64_t> addresses(2 * count);
  std::vector<int32_t> ints(3 * count);
  ints.reserve(3 * count + static_cast<size_t>(packed));
  int32_t start = 0;
  for (size_t i = 0; i < count; ++i) {
    addresses[i] = orNull(runs[i].conv);
    addresses[count + i] = at(runs[i].memory);
    ints[i] = static_cast<int32_t>(runs[i].first);
    ints[count + i] = start;
    ints[2 * count + i] = static_cast<int32_t>(runs[i].rows);
    start += static_cast<int32_t>(runs[i].rows);
  }
  for (size_t i = 0; i < count; ++i) ints.insert(ints.end(), static_cast<size_t>(runs[i].rows), static_cast<int32_t>(i));
  std::vector<uint8_t> bytes(addresses.size() * sizeof(uint64_t) + ints.size() * sizeof(int32_t));
  std::memcpy(bytes.data(), addresses.data(), addresses.size() * sizeof(uint64_t));
  std::memcpy(bytes.data() + addresses.size() * sizeof(uint64_t), ints.data(), ints.size() * sizeof(int32_t));
  return bytes;
}

}  // namespace

void deltaNetMix(const DeltaNetRuns& r) {
  if (r.runs.empty()) return;
  const Gpu g = gpuops::gpuOf(r.qkv);
  const auto device = g.device();
  const int64_t channels = 2 * r.keyHeads * r.keyDim + r.valueHeads * r.valueDim, held = r.kernel - 1;
  const auto runs = static_cast<int64_t>(r.runs.size());
  int64_t packed = 0;
  for (const DeltaNetRuns::Run& run : r.runs) packed += run.rows;
  check(packed < (int64_t{1} << 31) && runs < 65536 && r.valueHeads <= kMaxGrid,
        "deltaNetMix: too many rows, runs or heads for one launch");
  const uint64_t table = copiedOnce(g, deltaRunTable(r.runs, packed));
  const Tensor mixed = gpuops::empty({packed, channels}, DType::F32, device);
  launch(g, "gz_lm_delta_conv", strideGrid(g, packed * channels), kThreads, at(mixed), at(r.qkv), at(r.taps), table,
         runs, packed, channels, r.kernel);
  if (held > 0) {
    // The runs' next conv states, then put in place: the conv above read the states.
    const Tensor next = gpuops::empty({runs, held, channels}, DType::F32, device);
    launch(g, "gz_lm_delta_conv_state", strideGrid(g, runs * held * channels), kThreads, at(next), at(r.qkv), table,
           runs, channels, held);
    launch(g, "gz_lm_delta_conv_keep", strideGrid(g, runs * held * channels), kThreads, at(next), table, runs,
           held * channels);
  }
  // q (over sqrt(keyDim)) and k of each key head, L2-normalised.
  const int64_t heads = packed * r.keyHeads, keyWidth = r.keyHeads * r.keyDim;
  const auto warps = Dim3{static_cast<unsigned>((heads + 7) / 8), 1, 1};
  launch(g, "gz_lm_l2_normalize", warps, kThreads, at(mixed), heads, r.keyHeads, channels, r.keyDim,
         1.0f / std::sqrt(static_cast<float>(r.keyDim)));
  launch(g, "gz_lm_l2_normalize", warps, kThreads, at(mixed) + static_cast<uint64_t>(keyWidth) * 4, heads, r.keyHeads,
         channels, r.keyDim, 1.0f);
  const int64_t gates = packed * r.valueHeads;
  const Tensor beta = gpuops::empty({gates}, DType::F32, device), decay = gpuops::empty({gates}, DType::F32, device);
  launch(g, "gz_lm_delta_gates", strideGrid(g, gates), kThreads, at(beta), at(decay), at(r.b), at(r.a),
         at(r.decayRate), at(r.dtBias), table, runs, packed, r.valueHeads);
  // As on the CPU, a run of one row by the recurrence, a longer one in chunks (by the recurrence
  // too where a key head is longer than the chunks' kernel holds).
  const bool chunked = r.keyDim <= kMaxDeltaKey;
  int64_t chunks = 0;
  bool recurrent = false;
  for (const DeltaNetRuns::Run& run : r.runs) {
    if (run.rows > 1 && chunked) chunks = std::max(chunks, (run.rows + kDeltaChunk - 1) / kDeltaChunk);
    else recurrent = true;
  }
  if (recurrent) {
    const int64_t columns = r.valueHeads * r.valueDim;
    launch(g, "gz_lm_delta_rule",
           Dim3{static_cast<unsigned>((columns + kThreads - 1) / kThreads), static_cast<unsigned>(runs), 1}, kThreads,
           at(r.o), at(mixed), at(beta), at(decay), table, runs, r.keyHeads, r.valueHeads, r.keyDim, r.valueDim,
           chunked ? 1 : 0);
  }
  if (chunks == 0) return;
  const Tensor uw = gpuops::empty({gates, r.valueDim + r.keyDim}, DType::F32, device);
  const Tensor within = gpuops::empty({gates, kDeltaChunk}, DType::F32, device);
  const Tensor logDecay = gpuops::empty({gates}, DType::F32, device);
  launch(g, "gz_lm_delta_chunks",
         Dim3{static_cast<unsigned>(chunks), static_cast<unsigned>(r.valueHeads), static_cast<unsigned>(runs)},
         kThreads, at(uw), at(within), at(logDecay), at(mixed), at(beta), at(decay), table, runs, r.keyHeads,
         r.valueHeads, r.keyDim, r.valueDim);
  launch(g, "gz_lm_delta_carry",
         Dim3{static_cast<unsigned>((r.valueDim + kDeltaColumns - 1) / kDeltaColumns),
              static_cast<unsigned>(r.valueHeads), static_cast<unsigned>(runs)},
         kThreads, at(r.o), at(uw), at(within), at(logDecay), at(mixed), table, runs, r.keyHeads, r.valueHeads,
         r.keyDim, r.valueDim);
}

void gatedNorm(const Tensor& o, const Tensor& z, const Tensor& w, float eps, int64_t runs, int64_t n) {
  check(runs < (int64_t{1} << 31), "gatedNorm: too many runs for one launch");
  launch(gpuops::gpuOf(o), "gz_lm_gated_norm", Dim3{static_cast<unsigned>(runs), 1, 1}, kThreads, at(o), at(z), at(w),
         n, eps);
}

void addWeightedRows(const Tensor& out, const std::vector<int64_t>& ids, const std::vector<float>& weights,
                     const Tensor& y, int64_t width) {
  if (ids.empty()) return;
  const Gpu g = gpuops::gpuOf(out);
  const auto n = static_cast<int64_t>(ids.size());
  gizhw::gpu::Buffer both = g.allocate(ids.size() * (sizeof(int64_t) + sizeof(float)));
  g.copyToDevice(both.address(), ids.data(), ids.size() * sizeof(int64_t), g.stream());
  const uint64_t weightsAt = both.address() + ids.size() * sizeof(int64_t);
  g.copyToDevice(weightsAt, weights.data(), weights.size() * sizeof(float), g.stream());
  launch(g, "gz_lm_add_weighted_rows", strideGrid(g, n * width), kThreads, at(out), at(y), both.address(), weightsAt,
         n, width);
}

void penalize(const Tensor& on, const LogitEdits& edits) {
  const auto n = static_cast<int64_t>(edits.at.size());
  if (n == 0) return;
  // The edits in one buffer, one copy: ids, repetitions, subtractions, bias offsets, biases, each
  // at a multiple of 8 bytes.
  const auto padded = [](size_t bytes) { return (bytes + 7) / 8 * 8; };
  const size_t ids = 0, repetition = ids + padded(edits.at.size() * sizeof(uint64_t)),
               minus = repetition + padded(edits.repetition.size() * sizeof(float)),
               starts = minus + padded(edits.minus.size() * sizeof(float)),
               bias = starts + padded(edits.biasStart.size() * sizeof(int32_t)),
               total = bias + padded(edits.bias.size() * sizeof(float));
  std::vector<uint8_t> packed(total);
  std::memcpy(packed.data() + ids, edits.at.data(), edits.at.size() * sizeof(uint64_t));
  std::memcpy(packed.data() + repetition, edits.repetition.data(), edits.repetition.size() * sizeof(float));
  std::memcpy(packed.data() + minus, edits.minus.data(), edits.minus.size() * sizeof(float));
  std::memcpy(packed.data() + starts, edits.biasStart.data(), edits.biasStart.size() * sizeof(int32_t));
  if (!edits.bias.empty()) std::memcpy(packed.data() + bias, edits.bias.data(), edits.bias.size() * sizeof(float));
  const Gpu g = gpuops::gpuOf(on);
  gizhw::gpu::Buffer buffer = g.allocate(total);
  g.copyToDevice(buffer.address(), packed.data(), packed.size(), g.stream());
  const uint64_t base = buffer.address();
  launch(g, "gz_lm_penalize", strideGrid(g, n), kThreads, base + ids, base + repetition, base + minus, base + starts,
         base + bias, n);
}

void maskRows(const Tensor& on, const std::vector<MaskedRow>& rows, int64_t vocab) {
  if (rows.empty()) return;
  const auto words = static_cast<size_t>((vocab + 31) / 32);
  check(vocab > 0 && static_cast<int64_t>(rows.size()) <= kMaxGrid, "maskRows: no vocabulary, or too many rows");
  // One buffer: the table (a row's address, its bits' address, zero), then each grammar state's
  // bits once (rows of one state: choices of a request, requests in the same state).
  std::vector<const std::vector<uint32_t>*> states;
  std::vector<size_t> stateOf;
  for (const MaskedRow& r : rows) {
    check(r.words->size() >= words, "maskRows: a row's bits do not cover the vocabulary");
    auto same = std::find_if(states.begin(), states.end(), [&](const auto* s) { return *s == *r.words; });
    if (same == states.end()) same = states.insert(states.end(), r.words);
    stateOf.push_back(static_cast<size_t>(same - states.begin()));
  }
  const size_t tableBytes = rows.size() * 3 * sizeof(uint64_t), stateBytes = words * sizeof(uint32_t);
  std::vector<uint8_t> packed(tableBytes + states.size() * stateBytes);
  for (size_t s = 0; s < states.size(); ++s) std::memcpy(packed.data() + tableBytes + s * stateBytes, states[s]->data(), stateBytes);
  const Gpu g = gpuops::gpuOf(on);
  gizhw::gpu::Buffer buffer = g.allocate(packed.size());
  std::vector<uint64_t> table;
  for (size_t i = 0; i < rows.size(); ++i)
    table.insert(table.end(), {rows[i].row, buffer.address() + tableBytes + stateOf[i] * stateBytes,
                               uint64_t{rows[i].zero ? 1u : 0u}});
  std::memcpy(packed.data(), table.data(), tableBytes);
  g.copyToDevice(buffer.address(), packed.data(), packed.size(), g.stream());
  Dim3 grid = strideGrid(g, vocab);
  grid.y = static_cast<unsigned>(rows.size());
  launch(g, "gz_lm_token_masks", grid, kThreads, buffer.address(), vocab);
}

namespace {

// Threads of a block of gz_lm_code_kv (GZ_LM_CODE_THREADS): a block codes one head's vector.
constexpr unsigned kCodeThreads = 128;

// The kind of a side's elements for the kernels (0 where it holds codes, which they read by its bits).
int sideKind(const char* op, const Tensor& data, int bits) { return bits > 0 ? 0 : elementKind(op, data.dtype()); }

// The device address of a side's ranges (0 where it holds elements).
uint64_t rangesOf(const Tensor& ranges) { return ranges.ndim() > 0 ? at(ranges) : 0; }

// Whether attention over these pages runs on the tensor cores (gz_lm_attention_mma): NVIDIA sm_80+,
// keys and values each F16 or codes, a head's dimension a multiple of 16. By the device and the pool alone, so
// every pass of a model runs the same kernel.
bool tensorCoreAttention(const gizhw::gpu::Properties& props, const KvPages& kv, int keyKind, int valueKind) {
  const bool halvesOrCodes = (kv.keyBits > 0 || keyKind == 1) && (kv.valueBits > 0 || valueKind == 1);
  return props.vendor == gizhw::gpu::Vendor::Nvidia && props.major >= 8 && halvesOrCodes && kv.headDim % 16 == 0;
}

// gz_lm_attention_mma's tiles of rows first .. first + n - 1 (numbered from first): (first row,
// rows, first head of the group, heads), up to kAttentionPairs (row, head) pairs of rows that
// share a page table (a sequence's consecutive rows of a pass).
std::vector<int32_t> attentionTiles(const std::vector<uint64_t>& tables, int64_t first, int64_t n, int64_t group) {
  const int64_t heads = std::min(group, kAttentionPairs), rowsATile = kAttentionPairs / heads;
  std::vector<int32_t> tiles;
  for (int64_t r = 0; r < n;) {
    int64_t rows = 1;
    while (rows < rowsATile && r + rows < n && tables[static_cast<size_t>(first + r + rows)] == tables[static_cast<size_t>(first + r)])
      ++rows;
    for (int64_t h0 = 0; h0 < group; h0 += heads)
      tiles.insert(tiles.end(), {static_cast<int32_t>(r), static_cast<int32_t>(rows), static_cast<int32_t>(h0),
                                 static_cast<int32_t>(std::min(heads, group - h0))});
    r += rows;
  }
  return tiles;
}

}  // namespace

void storeKeysValues(const KvPages& kv, const RowPlaces& places, const Tensor& k, const Tensor& v) {
  const Gpu g = gpuops::gpuOf(k);
  const PlacesOnGpu rows = placedRows(g, places);
  if (rows.rows == 0) return;
  if (kv.keyBits > 0 || kv.valueBits > 0) {
    check(kv.headDim <= cpu::kMaxCodedHead && kv.kvHeads <= kMaxGrid && rows.rows < (int64_t{1} << 31),
          "storeKeysValues: too many heads or rows, or heads too long, to code in one launch");
    launch(g, "gz_lm_code_kv", Dim3{static_cast<unsigned>(rows.rows), static_cast<unsigned>(kv.kvHeads), 2},
           kCodeThreads, at(kv.keys), rangesOf(kv.keyRanges), at(kv.values), rangesOf(kv.valueRanges), at(k), at(v),
           rows.tables, rows.positions, kv.kvHeads, kv.headDim, kv.pageTokens,
           sideKind("storeKeysValues", kv.keys, kv.keyBits), sideKind("storeKeysValues", kv.values, kv.valueBits),
           kv.keyBits, kv.valueBits);
    return;
  }
  launch(g, "gz_lm_store_kv", strideGrid(g, rows.rows * kv.kvHeads * kv.headDim), kThreads, at(kv.keys),
         at(kv.values), at(k), at(v), rows.tables, rows.positions, rows.rows, kv.kvHeads, kv.headDim, kv.pageTokens,
         elementKind("storeKeysValues", kv.keys.dtype()), elementKind("storeKeysValues", kv.values.dtype()));
}

void attention(const KvPages& kv, const RowPlaces& places, const Tensor& q, const Tensor& context, int64_t heads,
               float scale, int64_t window, int64_t keyEnd) {
  check(kv.headDim <= kMaxHead, "cachedAttention: heads of " + std::to_string(kv.headDim) +
                                    " values are longer than the GPU kernel's " + std::to_string(kMaxHead));
  const int64_t group = heads / kv.kvHeads;
  check(group * kv.headDim <= kMaxQueries, "cachedAttention: " + std::to_string(group) + " query heads of " +
                                               std::to_string(kv.headDim) + " a KV head are more than the GPU kernel's " +
                                               std::to_string(kMaxQueries) + " values");
  if (places.positions.empty()) return;
  const Gpu g = gpuops::gpuOf(q);
  const PlacesOnGpu placed = placedRows(g, places);
  const int64_t rows = placed.rows, last = *std::max_element(places.positions.begin(), places.positions.end());
  const int64_t chunks = (last + kChunk) / kChunk;
  check(heads <= kMaxGrid && kv.kvHeads <= kMaxGrid && chunks <= kMaxGrid,
        "cachedAttention: too many heads or positions for one launch");
  // The chunks' partial sums of a band of rows at a time, so that their scratch stays bounded.
  const int64_t rowFloats = heads * chunks * (2 + kv.headDim);
  const int64_t band = std::clamp<int64_t>(kPartFloats / rowFloats, 1, std::min<int64_t>(rows, int64_t{1} << 30));
  const Tensor part = gpuops::empty({band * rowFloats}, DType::F32, g.device());
  const int keyKind = sideKind("cachedAttention", kv.keys, kv.keyBits);
  const int valueKind = sideKind("cachedAttention", kv.values, kv.valueBits);
  const bool powerOfTwo = kv.headDim > 1 && (kv.headDim & (kv.headDim - 1)) == 0;
  const int rotated = kv.valueBits > 0 && powerOfTwo ? 1 : 0;
  const bool tensorCores = tensorCoreAttention(g.properties(), kv, keyKind, valueKind);
  for (int64_t first = 0; first < rows; first += band) {
    const int64_t n = std::min(band, rows - first);
    const uint64_t offset = static_cast<uint64_t>(first * heads * kv.headDim) * 4;
    const uint64_t tables = placed.tables + static_cast<uint64_t>(first) * 8;
    const uint64_t positions = placed.positions + static_cast<uint64_t>(first) * 4;
    if (tensorCores) {
      const std::vector<int32_t> tiles = attentionTiles(places.tables, first, n, heads / kv.kvHeads);
      launch(g, "gz_lm_attention_mma",
             Dim3{static_cast<unsigned>(tiles.size() / 4), static_cast<unsigned>(kv.kvHeads),
                  static_cast<unsigned>(chunks)},
             kThreads, at(part), at(q) + offset, at(kv.keys), at(kv.values), tables, positions,
             copiedOnce(g, bytesOf(tiles)), heads, kv.kvHeads, kv.headDim, kv.pageTokens, scale, window, chunks,
             rangesOf(kv.keyRanges), rangesOf(kv.valueRanges), kv.keyBits, kv.valueBits, keyEnd);
    } else {
      launch(g, "gz_lm_attention_part",
             Dim3{static_cast<unsigned>(n), static_cast<unsigned>(kv.kvHeads), static_cast<unsigned>(chunks)},
             kThreads, at(part), at(q) + offset, at(kv.keys), at(kv.values), tables, positions, heads, kv.kvHeads,
             kv.headDim, kv.pageTokens, scale, window, keyKind, valueKind, chunks, rangesOf(kv.keyRanges),
             rangesOf(kv.valueRanges), kv.keyBits, kv.valueBits, keyEnd);
    }
    launch(g, "gz_lm_attention_merge", Dim3{static_cast<unsigned>(n), static_cast<unsigned>(heads), 1}, kThreads,
           at(context) + offset, at(part), positions, heads, kv.headDim, window, chunks, rotated, keyEnd);
  }
}

}  // namespace gizml::llm::ops::gpu
