// Reductions along axes, softmax and cumsum. The reduced axes are moved last and the data
// viewed as [rows, n] (copied only when that view is not contiguous); floats reduce in f32 in
// the order of cpu/reduce.h, integers in i64, F64 in f64 in the same order.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/thread_pool.h"
#include "cpu/elementwise.h"
#include "cpu/reduce.h"
#include "tensor/gpu/tensor_ops.h"
#include "tensor/shape_util.h"

namespace gizml::tensor {
namespace {

using cpu::ReduceOp;

struct Rows {
  Tensor data;     // contiguous [rows, n] in the working type (F32, F64 or I64)
  int64_t rows = 1, n = 1;
  Shape outShape;  // the result's shape (keepdim honoured)
  Axes order;      // kept axes then reduced axes
};

Rows asRows(const Tensor& x, const Axes& axesIn, bool keepdim, const char* what) {
  const Axes axes = normalizeAxes(axesIn, x.ndim(), what);
  Rows r;
  for (int64_t i = 0; i < x.ndim(); ++i) {
    const bool reduced = std::binary_search(axes.begin(), axes.end(), i);
    if (!reduced) {
      r.order.push_back(i);
      r.rows *= x.shape()[i];
      r.outShape.push_back(x.shape()[i]);
    } else if (keepdim) {
      r.outShape.push_back(1);
    }
  }
  for (int64_t a : axes) {
    r.order.push_back(a);
    r.n *= x.shape()[a];
  }
  const DType work = x.dtype() == DType::F64 ? DType::F64
                     : isFloat(x.dtype()) || x.dtype() == DType::Bool ? DType::F32 : DType::I64;
  // I4 first widened to I8 (exact): its permuted views could split bytes.
  Tensor permuted = (x.dtype() == DType::I4 ? x.cast(DType::I8) : x).permute(r.order);
  r.data = (permuted.dtype() == work ? permuted.contiguous() : permuted.cast(work)).reshape({r.rows, r.n});
  return r;
}

// The reduction of x by op; the result's dtype is `result` (computed in F32 or I64).
Tensor reduce(const Tensor& x, ReduceOp op, const Axes& axes, bool keepdim, DType result, const char* what) {
  // Bools count exactly in i64 (f32 would stop being exact past 2^24 true values).
  const bool counting = x.dtype() == DType::Bool && (op == ReduceOp::Sum || op == ReduceOp::Prod);
  Rows r = asRows(counting ? x.cast(DType::I64) : x, axes, keepdim, what);
  if ((op == ReduceOp::Max || op == ReduceOp::Min) && r.n == 0 && r.rows > 0)
    throw Error(std::string(what) + ": reduction over an empty axis of shape " + shapeText(x.shape()));
  if (const auto gpu = r.data.storage()->gpu()) {
    Tensor out = gpuops::empty({r.rows}, r.data.dtype(), gpu);
    gpuops::reduceRows(op, r.data, r.rows, r.n, out);
    return out.reshape(r.outShape).cast(result);
  }
  if (r.data.dtype() == DType::F32) {
    Tensor out = empty({r.rows}, DType::F32);
    if (r.n == 0) {
      std::fill_n(out.data<float>(), r.rows, op == ReduceOp::Prod ? 1.0f : 0.0f);
    } else {
      cpu::reduceRowsF32(op, r.data.data<float>(), r.rows, r.n, nullptr, out.data<float>());
    }
    return out.reshape(r.outShape).cast(result);
  }
  if (r.data.dtype() == DType::F64) {
    Tensor out = empty({r.rows}, DType::F64);
    if (r.n == 0) std::fill_n(out.data<double>(), r.rows, op == ReduceOp::Prod ? 1.0 : 0.0);
    else cpu::reduceRowsF64(op, r.data.data<double>(), r.rows, r.n, nullptr, out.data<double>());
    return out.reshape(r.outShape).cast(result);
  }
  Tensor out = empty({r.rows}, DType::I64);
  cpu::reduceRowsI64(op, r.data.data<int64_t>(), r.rows, r.n, out.data<int64_t>());
  return out.reshape(r.outShape).cast(result);
}

DType sumType(DType t) { return isFloat(t) ? t : DType::I64; }
DType meanType(DType t) { return isFloat(t) ? t : DType::F32; }

Tensor argExtreme(const Tensor& x, int64_t axis, bool keepdim, bool isMax, const char* what) {
  Rows r = asRows(x, {axis}, keepdim, what);
  check(r.n > 0 || r.rows == 0, std::string(what) + ": axis " + std::to_string(axis) + " of shape " +
                                    shapeText(x.shape()) + " is empty");
  if (const auto gpu = r.data.storage()->gpu()) {
    Tensor out = gpuops::empty({r.rows}, DType::I64, gpu);
    gpuops::argExtremeRows(r.data, r.rows, r.n, isMax, out);
    return out.reshape(r.outShape);
  }
  Tensor out = empty({r.rows}, DType::I64);
  int64_t* o = out.data<int64_t>();
  const DType work = r.data.dtype();
  // The first extreme; a NaN counts as the extreme.
  auto search = [&](const auto* v) {
    int64_t best = 0;
    for (int64_t i = 1; i < r.n && !std::isnan(v[best]); ++i)
      if (std::isnan(v[i]) || (isMax ? v[i] > v[best] : v[i] < v[best])) best = i;
    return best;
  };
  core::parallelFor(r.rows, 64, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      int64_t best = 0;
      if (work == DType::F32) {
        best = search(r.data.data<float>() + row * r.n);
      } else if (work == DType::F64) {
        best = search(r.data.data<double>() + row * r.n);
      } else {
        const int64_t* v = r.data.data<int64_t>() + row * r.n;
        for (int64_t i = 1; i < r.n; ++i)
          if (isMax ? v[i] > v[best] : v[i] < v[best]) best = i;
      }
      o[row] = best;
    }
  });
  return out.reshape(r.outShape);
}

// Which row operation a GPU runs for alongAxis.
enum class RowOp { Softmax, LogSoftmax, Cumsum };

// Runs body(row pointer in, row pointer out, n) over every row along axis of a copy of x in
// the working type (double for F64, else float: body is called with that pointer type), and
// gives the result in x's layout.
template <class F>
Tensor alongAxis(const Tensor& x, int64_t axis, DType result, const char* what, RowOp rowOp, F&& body) {
  const int64_t ax = normalizeAxis(axis, std::max<int64_t>(x.ndim(), 1), what);
  if (x.ndim() == 0) return alongAxis(x.reshape({1}), 0, result, what, rowOp, body).reshape({});
  Axes order;
  for (int64_t i = 0; i < x.ndim(); ++i) if (i != ax) order.push_back(i);
  order.push_back(ax);
  const DType work = x.dtype() == DType::F64 ? DType::F64 : DType::F32;
  Rows r = asRows((x.dtype() == DType::I4 ? x.cast(work) : x).permute(order).cast(work), {x.ndim() - 1}, true, what);
  Tensor out;
  if (work == DType::F64) {
    out = empty({r.rows, r.n}, DType::F64);
    core::parallelFor(r.rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(r.n, 1)), [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) body(r.data.data<double>() + row * r.n, out.data<double>() + row * r.n, r.n);
    });
  } else if (const auto gpu = r.data.storage()->gpu()) {
    out = gpuops::empty({r.rows, r.n}, DType::F32, gpu);
    if (rowOp == RowOp::Cumsum) gpuops::cumsumRows(r.data, r.rows, r.n, out);
    else gpuops::softmaxRows(r.data, r.rows, r.n, rowOp == RowOp::LogSoftmax, out);
  } else {
    out = empty({r.rows, r.n}, DType::F32);
    core::parallelFor(r.rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(r.n, 1)), [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) body(r.data.data<float>() + row * r.n, out.data<float>() + row * r.n, r.n);
    });
  }
  Shape permutedShape;
  for (int64_t i : order) permutedShape.push_back(x.shape()[i]);
  Axes inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = static_cast<int64_t>(i);
  return out.reshape(permutedShape).permute(inverse).cast(result);
}

}  // namespace

Tensor Tensor::sum(const Axes& axes, bool keepdim) const {
  return reduce(*this, ReduceOp::Sum, axes, keepdim, sumType(dtype_), "sum");
}
Tensor Tensor::prod(const Axes& axes, bool keepdim) const {
  return reduce(*this, ReduceOp::Prod, axes, keepdim, sumType(dtype_), "prod");
}
Tensor Tensor::max(const Axes& axes, bool keepdim) const {
  return reduce(*this, ReduceOp::Max, axes, keepdim, dtype_, "max");
}
Tensor Tensor::min(const Axes& axes, bool keepdim) const {
  return reduce(*this, ReduceOp::Min, axes, keepdim, dtype_, "min");
}

Tensor Tensor::mean(const Axes& axes, bool keepdim) const {
  const Axes ax = normalizeAxes(axes, ndim(), "mean");
  int64_t n = 1;
  for (int64_t a : ax) n *= shape_[a];
  // The f32 (f64 for F64, or i64) sum divided by the count, in f32 (f64 for F64 and integer sums).
  const DType sumWork = dtype_ == DType::F64 ? DType::F64 : isFloat(dtype_) ? DType::F32 : DType::I64;
  Tensor total = reduce(*this, ReduceOp::Sum, axes, keepdim, sumWork, "mean");
  if (total.dtype() == DType::I64) {
    std::vector<double> v = total.toDoubles();  // f64 division (on the host for GPU tensors too)
    for (double& d : v) d = static_cast<double>(static_cast<float>(d / static_cast<double>(n)));
    const Tensor m = tensor(total.shape(), v, DType::F32);
    return total.onGpu() ? m.on(gizhw::gpu::Gpu(total.storage()->gpu())) : m;
  }
  return lazy(total).div(Lazy(static_cast<double>(n))).cast(meanType(dtype_)).eval();
}

namespace {

// The variance of each row on the host in V: the mean, then the sum of squared differences from
// it, over n - ddof (NaN where that is not positive).
template <class V>
Tensor hostVariance(const Rows& r, int64_t ddof, void (*reduce)(ReduceOp, const V*, int64_t, int64_t, const V*, V*)) {
  const DType dtype = std::is_same_v<V, double> ? DType::F64 : DType::F32;
  Tensor means = empty({r.rows}, dtype), out = empty({r.rows}, dtype);
  V* m = means.data<V>();
  V* o = out.data<V>();
  if (r.n > 0) {
    reduce(ReduceOp::Sum, r.data.data<V>(), r.rows, r.n, nullptr, m);
    for (int64_t i = 0; i < r.rows; ++i) m[i] /= static_cast<V>(r.n);
    reduce(ReduceOp::SumSquaredDiff, r.data.data<V>(), r.rows, r.n, m, o);
  }
  const V denominator = static_cast<V>(r.n - ddof);
  for (int64_t i = 0; i < r.rows; ++i) o[i] = r.n - ddof > 0 ? o[i] / denominator : static_cast<V>(NAN);
  return out.reshape(r.outShape);
}

}  // namespace

Tensor Tensor::variance(const Axes& axes, bool keepdim, int64_t ddof) const {
  check(ddof >= 0, "variance: ddof " + std::to_string(ddof) + " is negative");
  if (dtype_ == DType::F64) return hostVariance<double>(asRows(*this, axes, keepdim, "variance"), ddof, cpu::reduceRowsF64);
  Rows r = asRows(cast(DType::F32), axes, keepdim, "variance");
  if (const auto gpu = r.data.storage()->gpu()) {
    Tensor out = gpuops::empty({r.rows}, DType::F32, gpu);
    gpuops::varianceRows(r.data, r.rows, r.n, ddof, out);
    return out.reshape(r.outShape).cast(meanType(dtype_));
  }
  return hostVariance<float>(r, ddof, cpu::reduceRowsF32).cast(meanType(dtype_));
}

Tensor Tensor::argmax(int64_t axis, bool keepdim) const { return argExtreme(*this, axis, keepdim, true, "argmax"); }
Tensor Tensor::argmin(int64_t axis, bool keepdim) const { return argExtreme(*this, axis, keepdim, false, "argmin"); }

Tensor Tensor::softmax(int64_t axis) const {
  // exp(x - max) over its sum (the order of cpu/reduce.h), each divided by the sum.
  return alongAxis(*this, axis, meanType(dtype_), "softmax", RowOp::Softmax, []<class R>(const R* x, R* y, int64_t n) {
    if constexpr (std::is_same_v<R, double>) {
      const double m = cpu::reduceF64(ReduceOp::Max, x, n);
      for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i] - m);
      const double s = cpu::reduceF64(ReduceOp::Sum, y, n);
      for (int64_t i = 0; i < n; ++i) y[i] /= s;
    } else {
      const float m = cpu::reduceF32(ReduceOp::Max, x, n);
      std::vector<float> shifted(x, x + n);
      for (float& v : shifted) v -= m;
      cpu::unaryF32(UnaryOp::Exp, shifted.data(), y, n);
      const float s = cpu::reduceF32(ReduceOp::Sum, y, n);
      for (int64_t i = 0; i < n; ++i) y[i] /= s;
    }
  });
}

Tensor Tensor::logSoftmax(int64_t axis) const {
  // x - max - log(sum exp(x - max)).
  return alongAxis(*this, axis, meanType(dtype_), "logSoftmax", RowOp::LogSoftmax, []<class R>(const R* x, R* y, int64_t n) {
    if constexpr (std::is_same_v<R, double>) {
      const double m = cpu::reduceF64(ReduceOp::Max, x, n);
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] - m;
      std::vector<double> e(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) e[i] = std::exp(y[i]);
      const double logSum = std::log(cpu::reduceF64(ReduceOp::Sum, e.data(), n));
      for (int64_t i = 0; i < n; ++i) y[i] -= logSum;
    } else {
      const float m = cpu::reduceF32(ReduceOp::Max, x, n);
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] - m;
      std::vector<float> e(static_cast<size_t>(n));
      cpu::unaryF32(UnaryOp::Exp, y, e.data(), n);
      const float logSum = std::log(cpu::reduceF32(ReduceOp::Sum, e.data(), n));
      for (int64_t i = 0; i < n; ++i) y[i] -= logSum;
    }
  });
}

Tensor Tensor::cumsum(int64_t axis) const {
  if (!isFloat(dtype_)) {
    // Integers and bools: exact i64 running sums.
    const int64_t ax = normalizeAxis(axis, std::max<int64_t>(ndim(), 1), "cumsum");
    Tensor x = ndim() == 0 ? reshape({1}) : *this;
    Tensor work = x.dtype() == DType::I64 ? x.clone() : x.cast(DType::I64);
    const int64_t n = x.shape()[ax];
    int64_t inner = 1;
    for (int64_t i = ax + 1; i < x.ndim(); ++i) inner *= x.shape()[i];
    const int64_t outer = n == 0 ? 0 : x.numel() / (n * inner);
    if (work.onGpu()) {
      gpuops::cumsumI64(work, outer, n, inner);
      return ndim() == 0 ? work.reshape({}) : work;
    }
    int64_t* v = work.data<int64_t>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 1; i < n; ++i)
        for (int64_t j = 0; j < inner; ++j) {
          int64_t* p = v + (o * n + i) * inner + j;
          *p = cpu::wrapAdd(*p, *(p - inner));
        }
    return ndim() == 0 ? work.reshape({}) : work;
  }
  // Floats: an f32 running sum in index order (f64 for F64).
  return alongAxis(*this, axis, dtype_, "cumsum", RowOp::Cumsum, []<class R>(const R* x, R* y, int64_t n) {
    R s = 0;
    for (int64_t i = 0; i < n; ++i) y[i] = s += x[i];
  });
}

}  // namespace gizml::tensor
