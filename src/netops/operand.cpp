// Operand checks shared by the netops functions.
#include "netops/operand.h"

namespace gizml::netops::detail {

std::string where(const char* fn) { return std::string("netops::") + fn + ": "; }

Tensor floatOperand(const char* fn, const char* arg, const Tensor& t) {
  check(t.dtype() != DType::F64, where(fn) + arg + " has dtype f64, which this operation does not support (it "
                                                   "computes in f32; cast to f32 first)");
  check(isFloat(t.dtype()), where(fn) + arg + " has dtype " + dtypeName(t.dtype()) + ", not a float type");
  return t.cast(DType::F32).contiguous();
}

bool anyF64(std::initializer_list<const Tensor*> operands) {
  for (const Tensor* t : operands)
    if (t->dtype() == DType::F64) return true;
  return false;
}

Tensor hostF64(const char* fn, const char* arg, const Tensor& t) {
  check(isFloat(t.dtype()), where(fn) + arg + " has dtype " + dtypeName(t.dtype()) + ", not a float type");
  check(!t.onGpu(), where(fn) + arg + " is on " + t.device() + ": f64 runs only on the CPU");
  return t.cast(DType::F64).contiguous();
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

}  // namespace gizml::netops::detail
