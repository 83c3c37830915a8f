#pragma once
// Shape arithmetic shared by the tensor code: element counts, axes, strides, broadcasting.
#include <gizml/tensor.h>

#include <optional>

namespace gizml::tensor {

/// The product of the dimensions; an Error when one is negative or the product overflows.
int64_t elementCount(const Shape& shape);
/// Axis in [-rank, rank) to [0, rank); an Error naming `what` otherwise.
int64_t normalizeAxis(int64_t axis, int64_t rank, const char* what);
/// Sorted, distinct, normalized axes; empty input means every axis.
Axes normalizeAxes(const Axes& axes, int64_t rank, const char* what);
Shape contiguousStrides(const Shape& shape);
/// Resolves one -1 in `requested` so its element count is `count`.
Shape inferShape(const Shape& requested, int64_t count);
/// Strides that view (shape, strides) as `target` without a copy, if they exist.
std::optional<Shape> viewStrides(const Shape& shape, const Shape& strides, const Shape& target);
/// Output axes of `shape` merged where every operand walks them with one stride, unit axes
/// dropped, so contiguous operands become one run: the merged dims and each operand's strides
/// over them (one axis of length 1 and stride 0 for a single element).
struct Coalesced {
  Shape dims;
  std::vector<Shape> strides;
};
Coalesced coalesceAxes(const Shape& shape, const std::vector<Shape>& strides);

/// Why the view (shape, strides, offset) of I4 elements would split a byte, or "" when it does
/// not: it must start at a byte and keep each byte's two elements side by side (docs/tensor.md).
std::string i4ViewProblem(const Shape& shape, const Shape& strides, int64_t offset);

/// The strides of (shape, strides) broadcast to target (0 on broadcast axes), or an Error.
Shape broadcastStrides(const Shape& shape, const Shape& strides, const Shape& target);

}  // namespace gizml::tensor
