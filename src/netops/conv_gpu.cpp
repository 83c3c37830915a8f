// Launches of the convolution and pooling kernels (src/netops/kernels/netops_conv.cu.inc): 256 threads
// a block in grid-stride loops for the elementwise ones, 128 (four warps) for the implicit GEMM.
#include "netops/conv_gpu.h"

#include <algorithm>

#include "netops/kernel_sources.h"
#include "netops/operand.h"
#include "tensor/gpu/codegen.h"
#include "tensor/gpu/tensor_ops.h"

namespace gizml::netops::detail {
namespace {

constexpr int64_t kThreads = 256;
constexpr int64_t kImplicitThreads = 128, kTileM = 64, kTileN = 64;

template <class... Args>
void launch(const Tensor& on, const char* name, gizhw::gpu::Dim3 grid, unsigned threads, Args... args) {
  const gizhw::gpu::Gpu gpu = gpuops::gpuOf(on);
  void* params[] = {static_cast<void*>(&args)...};
  gpu.staticKernel(netopsConvKernelSource(), name).launch(grid, {threads, 1, 1}, 0, gpu.stream(), params);
}

// A grid-stride launch over `work` elements: at most 32 blocks a multiprocessor, each thread then
// loops (the grid's x limit never binds).
template <class... Args>
void launchOver(const Tensor& on, const char* name, int64_t work, Args... args) {
  if (work == 0) return;
  const int64_t cap = std::max<int64_t>(int64_t{gpuops::gpuOf(on).properties().multiprocessors} * 32, 1);
  const auto blocks = static_cast<unsigned>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, cap));
  launch(on, name, {blocks, 1, 1}, static_cast<unsigned>(kThreads), args...);
}

Tensor emptyOn(const Tensor& on, const tensor::Shape& shape, DType dtype = DType::F32) {
  return gpuops::empty(shape, dtype, on.storage()->gpu());
}

}  // namespace

Tensor f32Operand(const char* fn, const char* arg, const Tensor& t, bool gpu) {
  return gpu ? floatOperand(fn, arg, t) : hostF32(fn, arg, t);
}

Tensor im2colGpu(const Tensor& x, int64_t kh, int64_t kw, int64_t stride, int64_t pad, int64_t oh, int64_t ow) {
  const int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  Tensor cols = emptyOn(x, {n * oh * ow, c * kh * kw});
  launchOver(x, "gz_conv_im2col", cols.numel(), gpuops::address(x), gpuops::address(cols), n, c, h, w, kh, kw, stride,
             pad, oh, ow);
  return cols;
}

Tensor col2imGpu(const Tensor& cols, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride,
                 int64_t pad, int64_t oh, int64_t ow) {
  Tensor x = emptyOn(cols, {n, c, h, w});
  launchOver(cols, "gz_conv_col2im", x.numel(), gpuops::address(cols), gpuops::address(x), n, c, h, w, kh, kw, stride,
             pad, oh, ow);
  return x;
}

Tensor im2col1dGpu(const Tensor& x, int64_t k, int64_t stride, int64_t pad, int64_t dilation, int64_t first,
                   int64_t rows) {
  const int64_t t = x.shape()[0], c = x.shape()[1];
  Tensor cols = emptyOn(x, {rows, c * k});
  launchOver(x, "gz_conv_im2col1d", cols.numel(), gpuops::address(x), gpuops::address(cols), t, c, k, stride, pad,
             dilation, first, rows);
  return cols;
}

Tensor col2im1dGpu(const Tensor& cols, int64_t c, int64_t length, int64_t k, int64_t stride, int64_t pad) {
  const int64_t n = cols.shape()[0];
  Tensor out = emptyOn(cols, {length, c});
  launchOver(cols, "gz_conv_col2im1d", out.numel(), gpuops::address(cols), gpuops::address(out), n, c, length, k,
             stride, pad);
  return out;
}

Tensor poolGpu(const Tensor& x, const PoolGeometry& g, bool average, float inv, const tensor::Shape& shape) {
  Tensor y = emptyOn(x, shape);
  launchOver(x, "gz_conv_pool", y.numel(), gpuops::address(x), gpuops::address(y), g.planes, g.h, g.w, g.oh, g.ow,
             g.size, g.stride, int{average}, inv);
  return y;
}

Tensor poolGradGpu(const Tensor& dy, const Tensor& x, const PoolGeometry& g, bool average, float count) {
  Tensor dx = emptyOn(x, x.shape());
  launchOver(x, "gz_conv_pool_grad", dx.numel(), gpuops::address(dy), gpuops::address(x), gpuops::address(dx),
             g.planes, g.h, g.w, g.oh, g.ow, g.size, g.stride, int{average}, count);
  return dx;
}

Tensor patchRowsGpu(const Tensor& x, int64_t kh, int64_t kw, int64_t pad, int64_t r0, int64_t r1, int64_t ow,
                    DType dtype) {
  const int64_t c = x.shape()[0], h = x.shape()[1], w = x.shape()[2], rows = r1 - r0;
  Tensor out = emptyOn(x, {c * kh * kw, rows * ow}, dtype);
  const int code = dtype == DType::F32 ? 0 : dtype == DType::BF16 ? 1 : 2;
  launchOver(x, "gz_conv_patch_rows", out.numel(), gpuops::address(x), gpuops::address(out), c, h, w, kh, kw, pad, r0,
             rows, ow, code);
  return out;
}

bool implicitConvRuns(const Tensor& on) {
  const auto& p = gpuops::gpuOf(on).properties();
  return p.vendor == gizhw::gpu::Vendor::Nvidia && p.major >= 8;
}

namespace {

// The implicit product's grid (pixels / 64, o / 64, batches), or an Error where its 32-bit
// indexes or one launch's grid would not hold the problem.
gizhw::gpu::Dim3 implicitGrid(int64_t o, int64_t depth, int64_t pixels, int64_t batches) {
  constexpr int64_t kInt = int64_t{1} << 31;
  check(depth < kInt && pixels < kInt && o < kInt,
        "netops::lazyConv: c kh kw = " + std::to_string(depth) + ", o = " + std::to_string(o) + " or oh ow = " +
            std::to_string(pixels) + " exceeds 2^31 - 1, the implicit product's 32-bit indexes");
  const int64_t tilesN = (pixels + kTileN - 1) / kTileN, tilesM = (o + kTileM - 1) / kTileM;
  check(tilesN < kInt && tilesM <= 65535 && batches <= 65535,
        "netops::lazyConv: " + std::to_string(o) + " outputs x " + std::to_string(pixels) + " pixels x " +
            std::to_string(batches) + " images exceed one launch's grid");
  return {static_cast<unsigned>(tilesN), static_cast<unsigned>(tilesM), static_cast<unsigned>(batches)};
}

// The implicit product with a generated store (planEpilogue's gz_element) for x of type X.
std::string tailKernelSource(const std::string& epilogue, const char* xType) {
  return netopsConvKernelSource() + epilogue +
         "struct GzIgTail {\n  const P* p;\n"
         "  __device__ __forceinline__ void operator()(i64 i, float v) const { gz_element(*p, i, v); }\n};\n"
         "extern \"C\" __global__ void __launch_bounds__(GZ_IG_THREADS) gz_conv_implicit_tail(const u16* wt, const " +
         std::string(xType) +
         "* x, i64 o, i64 c, i64 h, i64 w, i64 kh, i64 kw, i64 pad, i64 oh, i64 ow, i64 xBatch, P p) {\n"
         "  __shared__ __align__(16) u16 As[GZ_IG_M][GZ_IG_APITCH];\n"
         "  __shared__ __align__(16) u16 Bs[GZ_IG_K][GZ_IG_BPITCH];\n"
         "  gz_ig_conv(As, Bs, wt, x, GzIgTail{&p}, o, c, h, w, kh, kw, pad, oh, ow, xBatch);\n}\n";
}

}  // namespace

Tensor implicitConvGpu(const Tensor& w, const Tensor& x, int64_t batches, int64_t xBatch, int64_t c, int64_t h,
                       int64_t wd, int64_t kh, int64_t kw, int64_t pad, int64_t oh, int64_t ow) {
  const int64_t o = w.shape()[0], pixels = oh * ow;
  Tensor out = emptyOn(x, {batches, o, pixels});
  if (out.numel() == 0) return out;
  launch(x, x.dtype() == DType::BF16 ? "gz_conv_implicit_bf16" : "gz_conv_implicit_f32",
         implicitGrid(o, c * kh * kw, pixels, batches), static_cast<unsigned>(kImplicitThreads), gpuops::address(w),
         gpuops::address(x), gpuops::address(out), o, c, h, wd, kh, kw, pad, oh, ow, xBatch);
  return out;
}

void implicitConvTailGpu(const Tensor& w, const Tensor& x, int64_t batches, int64_t xBatch, int64_t c, int64_t h,
                         int64_t wd, int64_t kh, int64_t kw, int64_t pad, int64_t oh, int64_t ow,
                         const tensor::Lazy::Node& tail, const Tensor& out) {
  int64_t o = w.shape()[0];
  if (out.numel() == 0) return;
  const gizhw::gpu::Dim3 grid = implicitGrid(o, c * kh * kw, oh * ow, batches);
  const gpuops::ElementwisePlan plan = gpuops::planEpilogue(tail);
  std::vector<uint64_t> leaves;
  for (const auto* leaf : plan.leaves) leaves.push_back(gpuops::address(leaf->tensor));
  std::vector<uint64_t> block = gpuops::elementwiseParams(plan, gpuops::address(out), leaves);
  uint64_t wAddress = gpuops::address(w), xAddress = gpuops::address(x);
  void* params[] = {&wAddress, &xAddress, &o, &c, &h, &wd, &kh, &kw, &pad, &oh, &ow, &xBatch, block.data()};
  const gizhw::gpu::Gpu gpu = gpuops::gpuOf(x);
  gpu.kernel(tailKernelSource(plan.source, x.dtype() == DType::BF16 ? "u16" : "float"), "gz_conv_implicit_tail")
      .launch(grid, {static_cast<unsigned>(kImplicitThreads), 1, 1}, 0, gpu.stream(), params);
}

}  // namespace gizml::netops::detail
