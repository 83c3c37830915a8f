// Host launchers of the language-model step kernels (src/netops/kernels/netops_rows.cu.inc): they
// check sizes and addresses on the host, then queue the kernels on the GPU's stream.
#include <algorithm>

#include "netops/kernel_sources.h"
#include "netops/rows_common.h"

namespace gizml::netops {
namespace {

using gizhw::gpu::Dim3;
using gizhw::gpu::Gpu;

constexpr unsigned kThreads = 256;
template <class... Args>
void launch(const Gpu& g, const char* name, Dim3 grid, Args... args) {
  void* params[] = {static_cast<void*>(&args)...};
  g.staticKernel(netopsRowsKernelSource(), name).launch(grid, Dim3{kThreads, 1, 1}, 0, g.stream(), params);
}

void positive(const char* fn, const char* name, int64_t v) {
  check(v > 0, std::string(fn) + ": " + name + " must be positive, got " + std::to_string(v));
}

void address(const char* fn, const char* name, uint64_t a) {
  check(a != 0, std::string(fn) + ": " + name + " is a null device address");
}

// A grid of one block a row (the grid's x limit is 2^31 - 1).
Dim3 rowGrid(const char* fn, int64_t rows) {
  check(rows < (int64_t{1} << 31), std::string(fn) + ": " + std::to_string(rows) + " rows exceed one launch");
  return Dim3{static_cast<unsigned>(rows), 1, 1};
}

// A grid-stride grid for `work` elements, at most 32 blocks per multiprocessor.
Dim3 strideGrid(const Gpu& g, int64_t work) {
  const int64_t cap = std::max<int64_t>(int64_t{g.properties().multiprocessors} * 32, 1);
  return Dim3{static_cast<unsigned>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, cap)), 1, 1};
}

void checkLogitRows(const char* fn, int64_t rows, int64_t vocab, int64_t stride, bool indirect, uint64_t out,
                    uint64_t logits, uint64_t blocks) {
  positive(fn, "rows", rows);
  positive(fn, "vocab", vocab);
  check(stride >= vocab, std::string(fn) + ": stride " + std::to_string(stride) + " is less than vocab " +
                             std::to_string(vocab));
  check(vocab < (int64_t{1} << 24), std::string(fn) + ": vocab " + std::to_string(vocab) +
                                         " tokens do not all fit an f32 exactly");
  address(fn, "logits", logits);
  address(fn, "the output", out);
  if (indirect) address(fn, "blocks (indirect rows)", blocks);
}

}  // namespace

void argmaxInto(const Gpu& g, int64_t rows, int64_t vocab, int64_t stride, bool indirect, uint64_t top,
                uint64_t logits, uint64_t blocks) {
  constexpr const char* fn = "argmaxInto";
  checkLogitRows(fn, rows, vocab, stride, indirect, top, logits, blocks);
  launch(g, "gz_nr_argmax", rowGrid(fn, rows), top, logits, blocks, vocab, stride, int{indirect});
}

void candidatesInto(const Gpu& g, int64_t rows, int64_t vocab, int64_t stride, bool indirect, uint64_t cand,
                    uint64_t logits, uint64_t blocks) {
  constexpr const char* fn = "candidatesInto";
  checkLogitRows(fn, rows, vocab, stride, indirect, cand, logits, blocks);
  static_assert(CANDIDATE_ROW == kThreads * TOP_EACH * 2, "a row's candidates: 256 threads' TOP_EACH pairs");
  launch(g, "gz_nr_candidates", rowGrid(fn, rows), cand, logits, blocks, vocab, stride, int{indirect});
}

void splitSumInto(const Gpu& g, uint64_t y, uint64_t p, int64_t total, int64_t splits, bool add) {
  constexpr const char* fn = "splitSumInto";
  positive(fn, "total", total);
  positive(fn, "splits", splits);
  address(fn, "y", y);
  address(fn, "p", p);
  launch(g, "gz_nr_split_sum", strideGrid(g, total), y, p, total, splits, int{add});
}

void normRotateInto(const Gpu& g, int64_t rows, int64_t width, double eps, bool rotate, int64_t stride,
                    int64_t offset, uint64_t y, uint64_t x, uint64_t w, uint64_t d, uint64_t map) {
  constexpr const char* fn = "normRotateInto";
  positive(fn, "rows", rows);
  positive(fn, "width", width);
  check(offset >= 0, std::string(fn) + ": offset must not be negative, got " + std::to_string(offset));
  check(rows == 1 || stride >= offset + width, std::string(fn) + ": stride " + std::to_string(stride) +
                                                   " is less than offset + width = " + std::to_string(offset + width));
  check(eps >= 0.0, std::string(fn) + ": eps must not be negative");
  address(fn, "y", y);
  address(fn, "x", x);
  address(fn, "w", w);
  if (rotate) {
    check(width % 2 == 0, std::string(fn) + ": rotate-half needs an even width, got " + std::to_string(width));
    address(fn, "d (the cos and sin table)", d);
  }
  launch(g, "gz_nr_norm_rotate", rowGrid(fn, rows), y, x, w, d, map, width, static_cast<float>(eps), int{rotate},
         stride, offset);
}

void siluMulRotatedInto(const Gpu& g, int64_t rows, int64_t ffn, int64_t nUp, uint64_t y, uint64_t p, uint64_t d) {
  constexpr const char* fn = "siluMulRotatedInto";
  positive(fn, "rows", rows);
  positive(fn, "ffn", ffn);
  positive(fn, "nUp", nUp);
  address(fn, "y", y);
  address(fn, "p", p);
  if (d != 0)
    check(ffn % rows::kInt8Group == 0, std::string(fn) + ": ffn " + std::to_string(ffn) +
                                 " is not a multiple of 256, the Hadamard groups of the rotated copy d");
  launch(g, "gz_nr_silu_mul", strideGrid(g, rows * ffn), y, p, rows, ffn, nUp);
  if (d != 0) launch(g, "gz_nr_hadamard_rows", rowGrid(fn, rows * ffn / rows::kInt8Group), d, y);
}

void rowNormRopeInto(const Gpu& gpu, uint64_t at, int64_t stride, int64_t rows, int64_t width, int64_t head,
                     const Tensor& w, double eps, const std::vector<Tensor>& cos, const std::vector<Tensor>& sin) {
  constexpr const char* fn = "rowNormRopeInto";
  positive(fn, "rows", rows);
  positive(fn, "width", width);
  positive(fn, "head", head);
  check(rows == 1 || stride >= width, std::string(fn) + ": stride " + std::to_string(stride) +
                                          " is less than width " + std::to_string(width));
  check(eps >= 0.0, std::string(fn) + ": eps must not be negative");
  address(fn, "at", at);
  auto onThisGpu = [&](const char* name, const Tensor& t, const tensor::Shape& shape) {
    check(t.onGpu() && t.storage()->gpu() == gpu.device(),
          std::string(fn) + ": " + name + " is on " + t.device() + ", not on " + gpu.describe());
    rows::requireShape(fn, name, t, shape);
    check(t.dtype() == DType::F32, std::string(fn) + ": " + name + " must be F32, got " + dtypeName(t.dtype()));
    check(t.isContiguous(), std::string(fn) + ": " + name + " must be contiguous");
  };
  onThisGpu("w", w, {width});
  check(cos.size() == sin.size() && cos.size() <= 1,
        std::string(fn) + ": cos and sin are both absent or one tensor each, got " + std::to_string(cos.size()) +
            " and " + std::to_string(sin.size()));
  uint64_t cosAt = 0, sinAt = 0;
  if (!cos.empty()) {
    check(width % head == 0 && head % 2 == 0, std::string(fn) + ": width " + std::to_string(width) +
                                                  " must be whole heads of an even head " + std::to_string(head));
    onThisGpu("cos", cos[0], {rows, width / 2});
    onThisGpu("sin", sin[0], {rows, width / 2});
    cosAt = cos[0].storage()->deviceAddress() + static_cast<uint64_t>(cos[0].offset()) * 4;
    sinAt = sin[0].storage()->deviceAddress() + static_cast<uint64_t>(sin[0].offset()) * 4;
  }
  const uint64_t wAt = w.storage()->deviceAddress() + static_cast<uint64_t>(w.offset()) * 4;
  launch(gpu, "gz_nr_row_norm_rope", rowGrid(fn, rows), at, wAt, cosAt, sinAt, stride, width, head,
         static_cast<float>(eps));
}

}  // namespace gizml::netops
