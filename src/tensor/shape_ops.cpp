// Joining and indexing: concat, stack, gather, indexSelect.
#include <gizml/tensor.h>

#include <cstring>

#include "tensor/gpu/tensor_ops.h"
#include "tensor/shape_util.h"

namespace gizml::tensor {
namespace {
// The copies below move whole elements; I4 packs two a byte, so they join, select and gather its
// values as I8 (exact) and pack the result again.
Tensor widenedI4(const Tensor& t) { return t.dtype() == DType::I4 ? t.cast(DType::I8) : t; }
}  // namespace

Tensor concat(const std::vector<Tensor>& tensors, int64_t axis) {
  check(!tensors.empty(), "concat: no tensors");
  const Tensor& first = tensors[0];
  check(first.ndim() > 0, "concat: 0-d tensors cannot be joined (use stack)");
  const int64_t ax = normalizeAxis(axis, first.ndim(), "concat");
  Shape shape = first.shape();
  DType dtype = first.dtype();
  int64_t total = 0;
  for (const Tensor& t : tensors) {
    bool same = t.ndim() == first.ndim();
    for (int64_t i = 0; same && i < t.ndim(); ++i) same = i == ax || t.shape()[i] == shape[i];
    check(same, "concat: shape " + shapeText(t.shape()) + " does not match " + shapeText(first.shape()) +
                    " outside axis " + std::to_string(axis));
    dtype = promoteTypes(dtype, t.dtype());
    total += t.shape()[ax];
  }
  shape[ax] = total;
  if (dtype == DType::I4) {
    std::vector<Tensor> wide;
    for (const Tensor& t : tensors) wide.push_back(widenedI4(t));
    return concat(wide, axis).cast(DType::I4);
  }
  std::vector<const Tensor*> operands;
  for (const Tensor& t : tensors) operands.push_back(&t);
  gizml::gpuops::DevicePtr gpu;
  for (const Tensor* t : operands) gpu = gpuops::deviceOf("concat", {operands[0], t});
  Tensor out = gpu ? gpuops::empty(shape, dtype, gpu) : empty(shape, dtype);
  int64_t start = 0;
  for (const Tensor& t : tensors) {
    const int64_t len = t.shape()[ax];
    // Each part is a fused copy (with cast) into its slice of the output.
    Tensor part = lazy(t).cast(dtype).eval();
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < ax; ++i) outer *= shape[i];
    for (int64_t i = ax + 1; i < static_cast<int64_t>(shape.size()); ++i) inner *= shape[i];
    const size_t size = dtypeSize(dtype);
    const size_t rowBytes = static_cast<size_t>(len * inner) * size;
    if (gpu) {
      gpuops::copyRows(out, start * inner, total * inner, part, len * inner, outer, len * inner);
      start += len;
      continue;
    }
    for (int64_t o = 0; o < outer && rowBytes; ++o)
      std::memcpy(static_cast<char*>(out.rawData()) + (o * total + start) * inner * static_cast<int64_t>(size),
                  static_cast<const char*>(part.rawData()) + o * static_cast<int64_t>(rowBytes), rowBytes);
    start += len;
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t axis) {
  check(!tensors.empty(), "stack: no tensors");
  const int64_t ax = normalizeAxis(axis, tensors[0].ndim() + 1, "stack");
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) {
    check(t.shape() == tensors[0].shape(), "stack: shape " + shapeText(t.shape()) + " differs from " +
                                               shapeText(tensors[0].shape()));
    parts.push_back(t.unsqueeze(ax));
  }
  return concat(parts, ax);
}

namespace {
std::vector<int64_t> checkedIndices(const Tensor& indices, int64_t limit, const char* what) {
  check(isInteger(indices.dtype()), std::string(what) + ": indices must be integers, not " + dtypeName(indices.dtype()));
  std::vector<int64_t> idx = indices.toInts();
  for (int64_t& i : idx) {
    check(i >= -limit && i < limit, std::string(what) + ": index " + std::to_string(i) +
                                        " is out of range for an axis of length " + std::to_string(limit));
    if (i < 0) i += limit;
  }
  return idx;
}
}  // namespace

Tensor indexSelect(const Tensor& x, int64_t axis, const Tensor& indices) {
  if (x.dtype() == DType::I4) return indexSelect(widenedI4(x), axis, indices).cast(DType::I4);
  const int64_t ax = normalizeAxis(axis, x.ndim(), "indexSelect");
  check(indices.ndim() <= 1, "indexSelect: indices of shape " + shapeText(indices.shape()) + " must be 1-D");
  const auto gpu = gpuops::deviceOf("indexSelect", {&x, &indices});
  const std::vector<int64_t> idx = checkedIndices(indices, x.shape()[ax], "indexSelect");
  Shape shape = x.shape();
  shape[ax] = static_cast<int64_t>(idx.size());
  Tensor out = gpu ? gpuops::empty(shape, x.dtype(), gpu) : empty(shape, x.dtype());
  const Tensor src = x.contiguous();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < ax; ++i) outer *= shape[i];
  for (int64_t i = ax + 1; i < x.ndim(); ++i) inner *= shape[i];
  if (gpu) {
    gpuops::indexSelect(src, idx, outer, x.shape()[ax], inner, out);
    return out;
  }
  const int64_t rowBytes = inner * static_cast<int64_t>(dtypeSize(x.dtype()));
  const char* from = static_cast<const char*>(src.rawData());
  char* to = static_cast<char*>(out.rawData());
  const int64_t n = x.shape()[ax], count = static_cast<int64_t>(idx.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < count; ++j)
      std::memcpy(to + (o * count + j) * rowBytes, from + (o * n + idx[j]) * rowBytes, static_cast<size_t>(rowBytes));
  return out;
}

Tensor gather(const Tensor& x, int64_t axis, const Tensor& indices) {
  if (x.dtype() == DType::I4) return gather(widenedI4(x), axis, indices).cast(DType::I4);
  const int64_t ax = normalizeAxis(axis, x.ndim(), "gather");
  check(indices.ndim() == x.ndim(), "gather: indices of shape " + shapeText(indices.shape()) +
                                        " must have the rank of " + shapeText(x.shape()));
  for (int64_t i = 0; i < x.ndim(); ++i)
    check(i == ax || indices.shape()[i] <= x.shape()[i],
          "gather: indices of shape " + shapeText(indices.shape()) + " exceed " + shapeText(x.shape()) +
              " on axis " + std::to_string(i));
  const auto gpu = gpuops::deviceOf("gather", {&x, &indices});
  const std::vector<int64_t> idx = checkedIndices(indices, x.shape()[ax], "gather");
  if (gpu) {
    Tensor out = gpuops::empty(indices.shape(), x.dtype(), gpu);
    gpuops::gather(x, ax, idx, out);
    return out;
  }
  Tensor out = empty(indices.shape(), x.dtype());
  const size_t size = dtypeSize(x.dtype());
  const char* src = static_cast<const char*>(x.rawData());
  char* dst = static_cast<char*>(out.rawData());
  const Shape& shape = indices.shape();
  std::vector<int64_t> pos(shape.size(), 0);
  for (size_t e = 0; e < idx.size(); ++e) {
    int64_t offset = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      offset += (static_cast<int64_t>(d) == ax ? idx[e] : pos[d]) * x.strides()[d];
    std::memcpy(dst + e * size, src + offset * static_cast<int64_t>(size), size);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++pos[d] < shape[d]) break;
      pos[d] = 0;
    }
  }
  return out;
}

void assign(const Tensor& dst, const Tensor& src) {
  const Lazy value = lazy(src.expand(dst.shape())).cast(dst.dtype());
  if (dst.isContiguous()) {
    value.evalInto(dst);
    return;
  }
  // A strided destination: compute the values, then walk dst's strides element by element.
  check(dst.dtype() != DType::I4, "assign: an i4 destination must be contiguous (a strided one would be written "
                                  "a nibble at a time; assign into a contiguous tensor and copy it)");
  const Tensor values = value.eval();
  if (dst.onGpu()) {
    // On a GPU (found by the GPU emulator: grad's slice gradient wrote a GPU view through host
    // pointers): rows of contiguous elements at one stride, as a slice of a row-major tensor
    // is, copied by the GPU's row copy.
    std::vector<int64_t> sizes, strides;  // without the axes of length 1
    for (int64_t d = 0; d < dst.ndim(); ++d)
      if (dst.shape()[d] != 1) sizes.push_back(dst.shape()[d]), strides.push_back(dst.strides()[d]);
    // Elements apart (a column): rows of one element (found by tests/ops' table).
    if (sizes.empty() || strides.back() != 1) sizes.push_back(1), strides.push_back(1);
    const size_t n = sizes.size();
    bool rows = true;
    for (size_t d = 0; rows && d + 2 < n; ++d) rows = strides[d] == strides[d + 1] * sizes[d + 1];
    check(rows, "assign: a GPU destination must be rows of contiguous elements at one stride (a slice of a row-major "
                "tensor); copy it to the host for other layouts");
    const int64_t row = n ? sizes[n - 1] : 1, outer = values.numel() / std::max<int64_t>(row, 1);
    gpuops::copyRows(dst, 0, n >= 2 ? strides[n - 2] : row, values, row, outer, row);
    return;
  }
  const size_t size = dtypeSize(dst.dtype());
  const char* from = static_cast<const char*>(values.rawData());
  char* to = static_cast<char*>(dst.rawData());
  const Shape& shape = dst.shape();
  std::vector<int64_t> pos(shape.size(), 0);
  for (int64_t e = 0; e < values.numel(); ++e) {
    int64_t offset = 0;
    for (size_t d = 0; d < shape.size(); ++d) offset += pos[d] * dst.strides()[d];
    std::memcpy(to + offset * static_cast<int64_t>(size), from + e * static_cast<int64_t>(size), size);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++pos[d] < shape[d]) break;
      pos[d] = 0;
    }
  }
}

Tensor Tensor::indexSelect(int64_t axis, const Tensor& indices) const { return tensor::indexSelect(*this, axis, indices); }

}  // namespace gizml::tensor
