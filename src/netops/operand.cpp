// Operand checks shared by the netops functions.
#include "netops/operand.h"
#include "netops/windows.h"

namespace gizml::netops::detail {

std::string where(const char* fn) { return std::string("netops::") + fn + ": "; }

Tensor floatOperand(const char* fn, const char* arg, const Tensor& t) {
  check(isFloat(t.dtype()), where(fn) + arg + " has dtype " + dtypeName(t.dtype()) + ", not a float type");
  return t.cast(DType::F32).contiguous();
}

Tensor hostF32(const char* fn, const char* arg, const Tensor& t) {
  check(!t.onGpu(), where(fn) + "not implemented on the GPU yet (" + arg + " is on " + t.device() + ")");
  return floatOperand(fn, arg, t);
}

void requireRank(const char* fn, const char* arg, const Tensor& t, int64_t rank, const char* layout) {
  check(t.ndim() == rank, where(fn) + arg + " of shape " + tensor::shapeText(t.shape()) + " must be " + layout);
}

void requireShape(const char* fn, const char* arg, const Tensor& t, const tensor::Shape& shape) {
  check(t.shape() == shape, where(fn) + arg + " of shape " + tensor::shapeText(t.shape()) + " must be " +
                                tensor::shapeText(shape));
}

void requireAtLeast(const char* fn, const char* arg, int64_t value, int64_t minimum) {
  check(value >= minimum, where(fn) + arg + " = " + std::to_string(value) + " must be at least " +
                              std::to_string(minimum));
}

void requireLabels(const char* fn, const std::vector<int64_t>& labels, int64_t rows, int64_t classes) {
  check(static_cast<int64_t>(labels.size()) == rows, where(fn) + "labels has " + std::to_string(labels.size()) +
                                                         " entries for " + std::to_string(rows) + " rows of logits");
  for (size_t r = 0; r < labels.size(); ++r)
    check(labels[r] >= 0 && labels[r] < classes, where(fn) + "labels[" + std::to_string(r) + "] = " +
                                                     std::to_string(labels[r]) + " is outside [0, " +
                                                     std::to_string(classes) + ")");
}

int64_t windowCount(const char* fn, const char* sizeName, int64_t length, int64_t size, int64_t stride, int64_t pad,
                    int64_t dilation) {
  requireAtLeast(fn, sizeName, size, 1);
  requireAtLeast(fn, "stride", stride, 1);
  requireAtLeast(fn, "pad", pad, 0);
  requireAtLeast(fn, "dilation", dilation, 1);
  const int64_t span = dilation * (size - 1) + 1;
  check(length + 2 * pad >= span, where(fn) + sizeName + " = " + std::to_string(size) + " spans " +
                                       std::to_string(span) + " values, more than the " + std::to_string(length) +
                                       " (padded: " + std::to_string(length + 2 * pad) + ") of the input");
  return (length + 2 * pad - span) / stride + 1;
}

}  // namespace gizml::netops::detail
