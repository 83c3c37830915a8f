#pragma once
// The GPU paths of netops' convolution and pooling (src/netops/kernels/netops_conv.cu.inc): the host
// functions (im2col.cpp, conv1d.cpp, pool.cpp, rows_conv.cpp) check their arguments, then call
// these with contiguous operands on one GPU. Each returns a new tensor on that GPU.
#include <gizml/netops.h>

namespace gizml::netops::detail {

/// The operand as contiguous F32 where it is: hostF32 on the host, floatOperand on a GPU.
Tensor f32Operand(const char* fn, const char* arg, const Tensor& t, bool gpu);

/// im2col of x [n, c, h, w] (F32): [n oh ow, c kh kw].
Tensor im2colGpu(const Tensor& x, int64_t kh, int64_t kw, int64_t stride, int64_t pad, int64_t oh, int64_t ow);
/// col2im of cols [n oh ow, c kh kw] (F32): [n, c, h, w].
Tensor col2imGpu(const Tensor& cols, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride,
                 int64_t pad, int64_t oh, int64_t ow);
/// im2col1d of x [t, c] (F32), output rows first .. first + rows: [rows, c k].
Tensor im2col1dGpu(const Tensor& x, int64_t k, int64_t stride, int64_t pad, int64_t dilation, int64_t first,
                   int64_t rows);
/// col2im1d of cols [n, c k] (F32): [length, c].
Tensor col2im1dGpu(const Tensor& cols, int64_t c, int64_t length, int64_t k, int64_t stride, int64_t pad);

/// Pooling windows of `size` at `stride` over planes of h x w giving oh x ow.
struct PoolGeometry {
  int64_t planes, h, w, oh, ow, size, stride;
};
/// pool2d of x (F32, [.., h, w]) into `shape` ([.., oh, ow]).
Tensor poolGpu(const Tensor& x, const PoolGeometry& g, bool average, float inv, const tensor::Shape& shape);
/// pool2dGrad: dx of x's shape.
Tensor poolGradGpu(const Tensor& dy, const Tensor& x, const PoolGeometry& g, bool average, float count);

/// patchRows of x [c, h, w] (F32) for output rows r0 .. r1 as `dtype` (F32, BF16 or F16).
Tensor patchRowsGpu(const Tensor& x, int64_t kh, int64_t kw, int64_t pad, int64_t r0, int64_t r1, int64_t ow,
                    DType dtype);

/// Whether lazyConv may read patches inside the product on this GPU: NVIDIA matrix cores (sm_80+).
bool implicitConvRuns(const Tensor& on);
/// The implicit-GEMM convolution: for each of `batches` images (x + b xBatch elements, each
/// [c, h, w], BF16 or F32), w [o, c kh kw] (BF16) times its patches, stride 1 with `pad`:
/// [batches, o, oh ow] F32; the patches are read into shared memory and never stored.
Tensor implicitConvGpu(const Tensor& w, const Tensor& x, int64_t batches, int64_t xBatch, int64_t c, int64_t h,
                       int64_t wd, int64_t kh, int64_t kw, int64_t pad, int64_t oh, int64_t ow);
/// The same product with the Lazy expression `tail` over it (its one deferred product, of its
/// shape) computed in the product's store: each output element of tail goes into out (tail's
/// shape and dtype, contiguous, on x's GPU) from its accumulator; the product is never stored.
void implicitConvTailGpu(const Tensor& w, const Tensor& x, int64_t batches, int64_t xBatch, int64_t c, int64_t h,
                         int64_t wd, int64_t kh, int64_t kw, int64_t pad, int64_t oh, int64_t ow,
                         const tensor::Lazy::Node& tail, const Tensor& out);

}  // namespace gizml::netops::detail
