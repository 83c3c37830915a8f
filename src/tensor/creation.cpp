// Creating tensors: from values, constants, ranges.
#include <gizml/tensor.h>

#include <cmath>
#include <cstring>

#include "cpu/convert.h"
#include "tensor/shape_util.h"

namespace gizml::tensor {

Tensor empty(const Shape& shape, DType dtype) {
  const int64_t n = elementCount(shape);
  const size_t size = dtype == DType::I4 ? 1 : dtypeSize(dtype);
  check(n <= static_cast<int64_t>(SIZE_MAX / 2 / size),
        "tensor of shape " + shapeText(shape) + " is too large to allocate");
  return Tensor(std::make_shared<Storage>(dtypeBytes(dtype, n)), dtype, shape, contiguousStrides(shape), 0);
}

Tensor tensor(const Shape& shape, const std::vector<double>& values, DType dtype) {
  const int64_t n = elementCount(shape);
  check(n == static_cast<int64_t>(values.size()),
        "tensor: shape " + shapeText(shape) + " holds " + std::to_string(n) + " values, " +
            std::to_string(values.size()) + " given");
  Tensor t = empty(shape, dtype);
  // Doubles go through the working representation of the dtype, as casts do.
  if (cpu::worksInF64(dtype)) {
    if (n > 0) std::memcpy(t.rawData(), values.data(), values.size() * sizeof(double));
  } else if (cpu::worksInF32(dtype)) {
    std::vector<float> f(values.size());
    for (size_t i = 0; i < values.size(); ++i) f[i] = doubleToWorkingF32(values[i], dtype);
    cpu::storeF32(dtype, f.data(), n, t.rawData());
  } else if (dtype == DType::I4) {
    // As a cast from F64: to nearest even, saturating at [-8, 7] (NaN gives 0).
    std::vector<int64_t> v(values.size());
    cpu::castF64ToI64(dtype, values.data(), n, v.data());
    cpu::storeI4(t.rawData(), 0, v.data(), n);
  } else {
    std::vector<int64_t> v(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      const double x = std::trunc(values[i]);
      check(std::isfinite(x) && std::abs(x) < 9.2e18,
            "tensor: value " + std::to_string(values[i]) + " does not fit " + dtypeName(dtype));
      v[i] = static_cast<int64_t>(x);
    }
    cpu::wrapI64To(dtype, v.data(), n);
    cpu::storeI64(dtype, v.data(), n, t.rawData());
  }
  return t;
}

Tensor full(const Shape& shape, double value, DType dtype) {
  // A 0-d tensor of the value, broadcast, evaluated once into the new tensor.
  return lazy(tensor({}, {value}, dtype).expand(shape)).eval();
}

Tensor zeros(const Shape& shape, DType dtype) { return empty(shape, dtype); }
Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }
Tensor scalar(double value, DType dtype) { return tensor({}, {value}, dtype); }

Tensor arange(double start, double stop, double step, DType dtype) {
  check(step != 0.0 && std::isfinite(step), "arange: step must be finite and non-zero");
  check(std::isfinite(start) && std::isfinite(stop), "arange: start and stop must be finite");
  const double count = std::ceil((stop - start) / step);
  check(count < 9e15, "arange: " + std::to_string(count) + " elements is too many");
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[i] = start + static_cast<double>(i) * step;
  return tensor({n}, values, dtype);
}

Tensor linspace(double start, double stop, int64_t count, DType dtype) {
  check(count >= 0, "linspace: count " + std::to_string(count) + " is negative");
  std::vector<double> values(static_cast<size_t>(count));
  const double step = count > 1 ? (stop - start) / static_cast<double>(count - 1) : 0.0;
  for (int64_t i = 0; i < count; ++i) values[i] = start + static_cast<double>(i) * step;
  if (count > 1) values.back() = stop;  // as numpy: the end point exactly
  return tensor({count}, values, dtype);
}

}  // namespace gizml::tensor
