// Launch of netops::w4a8Grid's kernel (src/netops/kernels/netops_w4a8_grid.cu.inc): 256 threads
// a block, a thread a packed byte, grid-stride over the rest. The operands are checked here too
// (dtypes, shapes, layout, one GPU), since this is callable on its own.
#include "netops/w4a8_grid_gpu.h"

#include <gizml/error.h>

#include <algorithm>
#include <string>

#include "gpu/device.h"
#include "netops/kernel_sources.h"
#include "tensor/gpu/tensor_ops.h"

namespace gizml::netops::w4a8gpu {
namespace {

using gizhw::gpu::Dim3;
using gizhw::gpu::Gpu;

constexpr const char* kFn = "w4a8Grid";
constexpr int64_t kThreads = 256;

std::string shapeOf(const Tensor& t) { return tensor::shapeText(t.shape()) + " " + dtypeName(t.dtype()); }

// An Error unless t is a contiguous `dtype` tensor on out's GPU.
void requireOperand(const char* name, const Tensor& t, DType dtype, const Tensor& out) {
  check(t.onGpu() && t.storage()->gpu() == out.storage()->gpu(),
        std::string(kFn) + ": " + name + " is on " + t.device() + ", but out is on " + out.device() +
            " (every operand must be on one GPU)");
  check(t.dtype() == dtype, std::string(kFn) + ": " + name + " must be " + dtypeName(dtype) + ", got " +
                                dtypeName(t.dtype()));
  check(t.isContiguous(), std::string(kFn) + ": " + name + " must be contiguous, got a view of shape " +
                              tensor::shapeText(t.shape()));
}

}  // namespace

void w4a8Grid(const Tensor& packed, const Tensor& scales, const Tensor& levels, int64_t group, const Tensor& out) {
  check(out.onGpu(), std::string(kFn) + ": out is on " + out.device() + ", not on a GPU");
  requireOperand("out", out, DType::I8, out);
  requireOperand("packed", packed, DType::I8, out);
  requireOperand("scales", scales, DType::F32, out);
  requireOperand("levels", levels, DType::F32, out);
  check(group > 0, std::string(kFn) + ": group must be positive, got " + std::to_string(group));
  check(packed.ndim() == 2, std::string(kFn) + ": packed must be [rows, in / 2], got " + shapeOf(packed));
  const int64_t rows = packed.size(0), half = packed.size(1), in = 2 * half;
  check(in % group == 0, std::string(kFn) + ": group " + std::to_string(group) + " does not divide in = " +
                             std::to_string(in) + " (packed " + shapeOf(packed) + ")");
  const tensor::Shape scaleShape{rows, in / group}, outShape{rows, in};
  check(scales.shape() == scaleShape, std::string(kFn) + ": scales must be " + tensor::shapeText(scaleShape) +
                                          " (rows, in / group " + std::to_string(group) + ") for packed " +
                                          shapeOf(packed) + ", got " + shapeOf(scales));
  check(levels.shape() == tensor::Shape{16}, std::string(kFn) + ": levels must be [16], got " + shapeOf(levels));
  check(out.shape() == outShape, std::string(kFn) + ": out must be " + tensor::shapeText(outShape) +
                                     " (rows, in) for packed " + shapeOf(packed) + ", got " + shapeOf(out));
  const int64_t total = rows * half;
  if (total == 0) return;
  const Gpu gpu(out.storage()->gpu());
  const int64_t cap = std::max<int64_t>(int64_t{out.storage()->gpu()->properties.multiprocessors} * 32, 1);
  const Dim3 grid{static_cast<unsigned>(std::clamp<int64_t>((total + kThreads - 1) / kThreads, 1, cap)), 1, 1};
  uint64_t p = gpuops::address(packed), s = gpuops::address(scales), l = gpuops::address(levels),
           o = gpuops::address(out);
  int64_t r = rows, h = half, g = group;
  void* params[] = {&p, &s, &l, &r, &h, &g, &o};
  gpu.staticKernel(netopsW4a8GridKernelSource(), "gz_nn_w4a8_grid")
      .launch(grid, {static_cast<unsigned>(kThreads), 1, 1}, 0, gpu.stream(), params);
}

}  // namespace gizml::netops::w4a8gpu
