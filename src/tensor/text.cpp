// Printing: nested brackets and the shortest decimal that reads back as the same value.
#include <gizml/tensor.h>

#include <charconv>
#include <cmath>
#include <cstdio>

namespace gizml::tensor {
namespace {

std::string floatText(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// The shortest decimal that reads back as the same double.
std::string doubleText(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// The fewest significant digits whose f16/bf16 rounding is the value itself.
std::string halfText(float v, DType t) {
  if (!std::isfinite(v)) return floatText(v);
  for (int digits = 1; digits <= 9; ++digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(v));
    const float back = std::strtof(buf, nullptr);
    const float rounded = t == DType::F16 ? halfToFloat(floatToHalf(back)) : bf16ToFloat(floatToBf16(back));
    if (rounded == v) return floatText(back);
  }
  return floatText(v);
}

std::string elementText(DType t, double f, int64_t i) {
  switch (t) {
    case DType::F32: return floatText(static_cast<float>(f));
    case DType::F64: return doubleText(f);
    case DType::F16: case DType::BF16: return halfText(static_cast<float>(f), t);
    case DType::Bool: return f != 0.0 ? "true" : "false";
    default: return std::to_string(i);
  }
}

}  // namespace

std::string Tensor::text() const {
  const bool floats = isFloat(dtype_) || dtype_ == DType::Bool;
  // F64 values as doubles; the other floats and bools through f32, which holds them exactly.
  std::vector<double> f;
  if (dtype_ == DType::F64) f = toDoubles();
  else if (floats) for (float v : toFloats()) f.push_back(v);
  const std::vector<int64_t> ints = floats ? std::vector<int64_t>{} : toInts();
  auto element = [&](int64_t k) { return floats ? elementText(dtype_, f[k], 0) : elementText(dtype_, 0, ints[k]); };
  if (shape_.empty()) return element(0);

  std::string s;
  int64_t next = 0;
  // Recursive descent over the axes; `next` walks the row-major elements.
  auto emit = [&](auto&& self, size_t axis) -> void {
    s += '[';
    for (int64_t i = 0; i < shape_[axis]; ++i) {
      if (i) s += ", ";
      if (axis + 1 == shape_.size()) s += element(next++);
      else self(self, axis + 1);
    }
    s += ']';
  };
  emit(emit, 0);
  return s;
}

}  // namespace gizml::tensor
