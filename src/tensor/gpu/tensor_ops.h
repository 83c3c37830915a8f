#pragma once
// The GPU backend of the tensor operations. src/tensor calls these at the top of an operation
// when its operands are on a GPU (docs/architecture.md, "GPU"); the CPU paths stay as they were.
#include <gizml/tensor.h>

#include <initializer_list>
#include <memory>
#include <string_view>

#include "cpu/reduce.h"
#include "tensor/lazy_node.h"

namespace gizml::gpuops {

using tensor::Lazy;
using tensor::Shape;
using tensor::Tensor;
using DevicePtr = std::shared_ptr<gizhw::gpu::Device>;

/// An operand of deviceOf: a tensor, named in the Error when it has a name.
struct Operand {
  Operand(const Tensor* t) : tensor(t) {}  // implicit: deviceOf(what, {&a, &b})
  Operand(const char* n, const Tensor* t) : tensor(t), name(n) {}
  const Tensor* tensor;
  const char* name = nullptr;
};

/// The GPU every operand is on, or null when all are on the CPU: the one answer to where an
/// operation runs, for every layer. An Error naming `what` and two devices when operands differ
/// ("what: operands on two devices, cpu and cuda:0", or with names "what: w is on cpu, x is on
/// cuda:0"), and an Error when the GPU was closed.
DevicePtr deviceOf(std::string_view what, std::initializer_list<Operand> operands);
/// The same for the leaves of an expression (and an optional output).
DevicePtr deviceOf(const Lazy::Node& root, const Tensor* out);
/// The handle of the GPU a tensor is on.
gizhw::gpu::Gpu gpuOf(const Tensor& t);
/// An uninitialised contiguous tensor on the device.
Tensor empty(const Shape& shape, DType dtype, const DevicePtr& device);
uint64_t address(const Tensor& t);  // the device address of the first element

/// out (contiguous, on the GPU) = the expression, in one generated kernel.
void evalLazy(const Lazy::Node& root, const Tensor& out);
/// out[r] = the reduction of row r of x ([rows, n] contiguous F32 or I64) in the CPU's order;
/// mode 1 divides F32 results by n.
void reduceRows(cpu::ReduceOp op, const Tensor& x, int64_t rows, int64_t n, const Tensor& out, int mode = 0);
/// Variance of each row ([rows, n] F32): the mean, then the sum of squared differences over n - ddof.
void varianceRows(const Tensor& x, int64_t rows, int64_t n, int64_t ddof, const Tensor& out);
void argExtremeRows(const Tensor& x, int64_t rows, int64_t n, bool isMax, const Tensor& out);
void softmaxRows(const Tensor& x, int64_t rows, int64_t n, bool log, const Tensor& out);
void cumsumRows(const Tensor& x, int64_t rows, int64_t n, const Tensor& out);
/// In place on a contiguous I64 tensor viewed as [outer, n, inner].
void cumsumI64(const Tensor& work, int64_t outer, int64_t n, int64_t inner);
/// out [batch, m, n] = a [.., m, k] b [.., k, n] for views broadcast to the batch shape.
void matmul(const Tensor& a, const Tensor& b, const Tensor& out);
/// out [m, n] I32 = a [m, k] I8 times b [k, n] I8 (contiguous), exact, on the INT8 matrix cores.
void intMatmul(const Tensor& a, const Tensor& b, const Tensor& out);
/// Copies outer rows of `row` elements from src (row stride srcStride) into dst at element
/// dstStart (row stride dstStride); both contiguous of one dtype.
void copyRows(const Tensor& dst, int64_t dstStart, int64_t dstStride, const Tensor& src, int64_t srcStride,
              int64_t outer, int64_t row);
void indexSelect(const Tensor& src, const std::vector<int64_t>& idx, int64_t outer, int64_t n, int64_t inner, const Tensor& out);
void gather(const Tensor& x, int64_t axis, const std::vector<int64_t>& idx, const Tensor& out);

/// Copies between the host and a GPU.
Tensor toDevice(const Tensor& t, const gizhw::gpu::Gpu& gpu);
Tensor toHost(const Tensor& t);

}  // namespace gizml::gpuops
