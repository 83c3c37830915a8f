// matmul: 2-D products and batches with broadcast batch axes, through cpu::sgemm on views
// (strided and transposed operands are read in place).
#include <gizml/tensor.h>

#include "cpu/gemm.h"
#include "cpu/int8_gemm.h"
#include "tensor/gpu/tensor_ops.h"
#include "tensor/shape_util.h"

namespace gizml::tensor {

Tensor matmul(const Tensor& aIn, const Tensor& bIn) {
  check(aIn.ndim() >= 1 && bIn.ndim() >= 1, "matmul: operands of shapes " + shapeText(aIn.shape()) +
                                                 " and " + shapeText(bIn.shape()) + " need at least one axis");
  // NumPy's rules: a 1-D left operand is a row, a 1-D right operand a column; both drop after.
  const Tensor a = aIn.ndim() == 1 ? aIn.unsqueeze(0) : aIn;
  const Tensor b = bIn.ndim() == 1 ? bIn.unsqueeze(1) : bIn;
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  check(b.size(-2) == k, "matmul: shapes " + shapeText(aIn.shape()) + " and " + shapeText(bIn.shape()) +
                             " do not match (" + std::to_string(k) + " != " + std::to_string(b.size(-2)) + ")");
  const Shape batchA(a.shape().begin(), a.shape().end() - 2), batchB(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = broadcastShapes(batchA, batchB);
  Shape aShape = batch, bShape = batch, outShape = batch;
  aShape.insert(aShape.end(), {m, k});
  bShape.insert(bShape.end(), {k, n});
  outShape.insert(outShape.end(), {m, n});
  const int64_t batches = elementCount(batch);

  const DType result = promoteTypes(a.dtype(), b.dtype()) == DType::Bool ? DType::I64 : promoteTypes(a.dtype(), b.dtype());
  if (const auto gpu = gpuops::deviceOf("matmul", {&aIn, &bIn})) {
    // BF16 and F16 pairs run on the tensor cores in their own dtype; the rest as on the CPU.
    const bool halves = (result == DType::BF16 || result == DType::F16) && a.dtype() == result && b.dtype() == result;
    const DType work = halves ? result : isFloat(result) ? DType::F32 : DType::I64;
    Tensor out = gpuops::empty(outShape, work, gpu);
    gpuops::matmul(a.cast(work).expand(aShape), b.cast(work).expand(bShape), out);
    Tensor r = out.cast(result);
    if (aIn.ndim() == 1) r = r.squeeze(-2);
    if (bIn.ndim() == 1) r = r.squeeze(-1);
    return r;
  }
  const DType work = result == DType::F64 ? DType::F64 : isFloat(result) ? DType::F32 : DType::I64;
  // Views broadcast to the batch; converted (a copy) only when not already in the working type.
  const Tensor av = (a.dtype() == work ? a : a.cast(work)).expand(aShape);
  const Tensor bv = (b.dtype() == work ? b : b.cast(work)).expand(bShape);
  Tensor out = empty(outShape, work);
  const int64_t rank = static_cast<int64_t>(outShape.size());
  auto batchOffset = [&](const Tensor& t, int64_t index) {
    int64_t offset = 0;
    for (int64_t axis = rank - 3; axis >= 0; --axis) {
      offset += (index % outShape[axis]) * t.strides()[axis];
      index /= outShape[axis];
    }
    return offset;
  };
  Tensor ai, bi;  // integer and f64 operands, contiguous per batch
  if (work != DType::F32) {
    ai = av.contiguous();
    bi = bv.contiguous();
  }
  for (int64_t i = 0; i < batches; ++i) {
    if (work == DType::F32) {
      cpu::sgemm(m, n, k, av.data<float>() + batchOffset(av, i), av.strides()[rank - 2], av.strides()[rank - 1],
                 bv.data<float>() + batchOffset(bv, i), bv.strides()[rank - 2], bv.strides()[rank - 1],
                 out.data<float>() + i * m * n, n, false);
    } else if (work == DType::F64) {
      cpu::gemmF64(m, n, k, ai.data<double>() + i * m * k, bi.data<double>() + i * k * n, out.data<double>() + i * m * n);
    } else {
      cpu::gemmI64(m, n, k, ai.data<int64_t>() + i * m * k, bi.data<int64_t>() + i * k * n, out.data<int64_t>() + i * m * n);
    }
  }
  Tensor r = out.cast(result);
  if (aIn.ndim() == 1) r = r.squeeze(-2);
  if (bIn.ndim() == 1) r = r.squeeze(-1);
  return r;
}

Tensor intMatmul(const Tensor& a, const Tensor& b) {
  check(a.ndim() == 2 && b.ndim() == 2 && a.dtype() == DType::I8 && b.dtype() == DType::I8 && a.size(1) == b.size(0),
        "intMatmul: operands " + shapeText(a.shape()) + " " + dtypeName(a.dtype()) + " and " + shapeText(b.shape()) + " " +
            dtypeName(b.dtype()) + " are not i8 matrices [m, k] and [k, n]");
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  if (const auto gpu = gpuops::deviceOf("intMatmul", {&a, &b})) {
    Tensor out = gpuops::empty({m, n}, DType::I32, gpu);
    gpuops::intMatmul(a.contiguous(), b.contiguous(), out);
    return out;
  }
  Tensor out = empty({m, n}, DType::I32);
  // The kernels read rows of a and of bᵀ: a transposed view of [n, k] rows is read in place.
  const Tensor rows = a.strides()[1] == 1 ? a : a.contiguous();
  const Tensor weights = b.strides()[0] == 1 && n > 0 ? b.transpose(0, 1) : b.transpose(0, 1).contiguous();
  cpu::int8Gemm(m, n, k, rows.data<int8_t>(), rows.strides()[0], weights.data<int8_t>(), weights.strides()[0],
                out.data<int32_t>(), n);
  return out;
}

Tensor Tensor::matmul(const Tensor& o) const { return tensor::matmul(*this, o); }

}  // namespace gizml::tensor
