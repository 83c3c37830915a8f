// Launches of the norm, INT8-row and argmax kernels (src/netops/kernels/netops_norm.cu.inc), 256
// threads a block: a thread a row for the row statistics (the host's order of additions), a
// block a row for the Hadamard rows, grid-stride elementwise passes for the rest.
#include "netops/norm_gpu.h"

#include <algorithm>
#include <cctype>

#include "gpu/device.h"
#include "netops/kernel_sources.h"
#include "netops/rows_common.h"

namespace gizml::netops::normgpu {
namespace {

using gizhw::gpu::Dim3;
using gizhw::gpu::Gpu;

constexpr int64_t kThreads = 256;

// Threads a block of the row statistics: a warp, so that a few thousand rows (a thread each)
// still spread over every multiprocessor.
constexpr int64_t kStatThreads = 32;

template <class... Args>
void launchWith(int64_t threads, const Tensor& on, const char* name, Dim3 grid, Args... args) {
  const Gpu gpu(on.storage()->gpu());
  void* params[] = {static_cast<void*>(&args)...};
  gpu.staticKernel(netopsNormKernelSource(), name)
      .launch(grid, {static_cast<unsigned>(threads), 1, 1}, 0, gpu.stream(), params);
}

template <class... Args>
void launch(const Tensor& on, const char* name, Dim3 grid, Args... args) {
  launchWith(kThreads, on, name, grid, args...);
}

// Enough blocks for `work` threads, at most 32 a multiprocessor (the kernels stride over the rest).
Dim3 strideGrid(const Tensor& on, int64_t work) {
  const int64_t cap = std::max<int64_t>(int64_t{on.storage()->gpu()->properties.multiprocessors} * 32, 1);
  return {static_cast<unsigned>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, cap)), 1, 1};
}

// A block a row (the grid's x limit is 2^31 - 1).
Dim3 rowGrid(const char* fn, int64_t rows) {
  check(rows < (int64_t{1} << 31), std::string(fn) + ": " + std::to_string(rows) + " rows exceed one launch");
  return {static_cast<unsigned>(rows), 1, 1};
}

uint64_t at(const Tensor& t) { return gpuops::address(t); }
int isBf16(const Tensor& t) { return t.dtype() == DType::BF16 ? 1 : 0; }

// Each row's [mean, 1 / sqrt(mean square + eps)] of x ([rows, width]), [rows, 2] F32 on x's GPU;
// a row whose map entry is not a row of [0, limit) gets a NaN factor.
Tensor rowStats(const Tensor& x, double eps, bool centered, const Tensor* map, int64_t limit) {
  const int64_t rows = x.size(0), width = x.size(1);
  Tensor stats = gpuops::empty({rows, 2}, DType::F32, x.storage()->gpu());
  launchWith(kStatThreads, x, "gz_nn_row_stats", Dim3{static_cast<unsigned>((rows + kStatThreads - 1) / kStatThreads), 1, 1},
             at(x), isBf16(x), rows, width, static_cast<float>(eps), int{centered}, map ? at(*map) : uint64_t{0}, limit,
             at(stats));
  return stats;
}

}  // namespace

Tensor rowsOperand(const char* fn, const char* name, const Tensor& t) {
  check(isFloat(t.dtype()) && t.dtype() != DType::F64,
        std::string(fn) + ": " + name + " must be a float tensor (F32, F16 or BF16), got " + dtypeName(t.dtype()));
  return t.dtype() == DType::F32 || t.dtype() == DType::BF16 ? t.contiguous() : t.cast(DType::F32).contiguous();
}

void requireGpuOutput(const char* fn, const char* name, const Tensor& t, std::initializer_list<DType> dtypes) {
  std::string names;  // "I8, I4 or F32"
  bool ok = false;
  size_t i = 0;
  for (DType d : dtypes) {
    ok = ok || t.dtype() == d;
    std::string upper = dtypeName(d);  // "bf16" -> "BF16", as the host's messages name dtypes
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    names += (i == 0 ? "" : i + 1 == dtypes.size() ? " or " : ", ") + upper;
    ++i;
  }
  check(ok, std::string(fn) + ": " + name + " must be " + names + " on a GPU, got " + dtypeName(t.dtype()));
  check(t.isContiguous(), std::string(fn) + ": " + name + " must be contiguous (it is written in place)");
}

void modulatedInto(const char* fn, const Modulated& m, const Tensor& y) {
  requireGpuOutput(fn, "y", y, {DType::BF16, DType::F32});
  const int64_t rows = m.x.size(0), width = m.x.size(1);
  if (rows == 0) return;
  const Tensor stats = rowStats(m.x, m.eps, m.centered, &m.map, m.shift.size(0));
  launch(m.x, "gz_nn_modulated", strideGrid(m.x, rows * width), at(m.x), isBf16(m.x), at(stats), at(m.w), at(m.shift),
         at(m.scale), at(m.map), m.shift.size(0), at(y), isBf16(y), rows, width, int{m.centered});
}

void int8RowsInto(const char* fn, const std::optional<Modulated>& m, const Tensor& x, const std::optional<Tensor>& y,
                  const Tensor& q, const Tensor& s, int64_t bits) {
  requireGpuOutput(fn, "q", q, {DType::I8, DType::I4, DType::F32});
  requireGpuOutput(fn, "s", s, {DType::F32});
  if (y) requireGpuOutput(fn, "y", *y, {DType::BF16, DType::F32});
  const int64_t rows = x.size(0), width = x.size(1);
  if (rows == 0) return;
  Tensor stats;
  if (m) stats = rowStats(m->x, m->eps, m->centered, &m->map, m->shift.size(0));
  const uint64_t none = 0;
  launch(x, "gz_nn_int8_rows", rowGrid(fn, rows), at(x), isBf16(x), m ? at(stats) : none, m ? at(m->w) : none,
         m ? at(m->shift) : none, m ? at(m->scale) : none, m ? at(m->map) : none, m ? m->shift.size(0) : int64_t{0},
         y ? at(*y) : none, y ? isBf16(*y) : 0, at(q), q.dtype() == DType::F32 ? 1 : q.dtype() == DType::I4 ? 2 : 0, at(s), width,
         int{m && m->centered}, static_cast<int>(bits));
}

void gatedNormAdd(const char* fn, const Tensor& x, const Tensor& y, const Tensor& w, const Tensor& gate,
                  const Tensor& map, double eps) {
  requireGpuOutput(fn, "x", x, {DType::F32});
  const int64_t rows = x.size(0), width = x.size(1);
  if (rows == 0) return;
  const Tensor stats = rowStats(y, eps, false, &map, gate.size(0));
  launch(x, "gz_nn_gated_add", strideGrid(x, rows * width), at(x), at(y), isBf16(y), at(stats), at(w), at(gate),
         at(map), gate.size(0), rows, width);
}

void pixelNorm(const char* fn, const Tensor& x, double eps, bool act, const Tensor& out) {
  requireGpuOutput(fn, "out", out, {DType::BF16, DType::F32});
  const int64_t frames = x.size(0), c = x.size(1), pixels = x.size(2);
  if (x.numel() == 0) return;
  const Tensor xc = x.contiguous();  // x itself when contiguous (out may be x), else a GPU copy
  launch(x, "gz_nn_pixel_norm", strideGrid(x, frames * pixels), at(xc), isBf16(xc), at(out), frames, c, pixels,
         static_cast<float>(eps), int{act});
}

Tensor groupNorm(const Tensor& x, int64_t groups, const Tensor& w, const Tensor& b, double eps, bool act) {
  const int64_t c = x.shape()[0], pixels = c == 0 ? 0 : x.numel() / c, perGroup = c / groups * pixels;
  Tensor y = gpuops::empty(x.shape(), DType::F32, x.storage()->gpu());
  if (x.numel() == 0) return y;
  check(groups < 65536, "groupNorm: " + std::to_string(groups) + " groups exceed one launch (65535)");
  Tensor part = gpuops::empty({groups, kGroupSlices}, DType::F64, x.storage()->gpu());
  Tensor stats = gpuops::empty({groups, 2}, DType::F64, x.storage()->gpu());
  const Dim3 slices{static_cast<unsigned>(kGroupSlices), static_cast<unsigned>(groups), 1};
  const Dim3 perGroupThread{static_cast<unsigned>((groups + kThreads - 1) / kThreads), 1, 1};
  for (int pass = 0; pass < 2; ++pass) {
    launch(x, "gz_nn_group_slices", slices, at(x), at(stats), at(part), perGroup, kGroupSlices, pass);
    launch(x, "gz_nn_group_finish", perGroupThread, at(part), at(stats), groups, kGroupSlices, perGroup, eps, pass);
  }
  launch(x, "gz_nn_group_apply", strideGrid(x, x.numel()), at(x), at(stats), at(w), at(b), at(y), x.numel(), perGroup,
         pixels, c / groups, int{act});
  return y;
}

std::vector<int64_t> argmax(const Tensor& x) {
  const int64_t width = x.shape().back(), rows = x.numel() / width;
  if (rows == 0) return {};
  Tensor top = gpuops::empty({rows}, DType::F32, x.storage()->gpu());
  argmaxInto(Gpu(x.storage()->gpu()), rows, width, width, false, at(top), at(x), 0);
  std::vector<int64_t> best;
  best.reserve(static_cast<size_t>(rows));
  for (double v : top.host().toDoubles()) best.push_back(static_cast<int64_t>(v));
  return best;
}

}  // namespace gizml::netops::normgpu
