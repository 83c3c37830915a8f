// The DiTs' shared pieces (dit_ops.h).
#include "dit_ops.h"

#include <cmath>

namespace gizml::diffusion {

Projection Projection::of(StoredWeight w, bool int8) {
  if (int8) return {{}, w.int8 ? Int8Linear(*w.int8) : Int8Linear(w.f32())};  // stored codes as they are
  if (w.int8) return {StoredWeight{w.f32()}, std::nullopt};                   // dequantized once
  return {std::move(w), std::nullopt};
}

Projection Projection::of(T::Tensor w, bool int8) { return of(StoredWeight{std::move(w)}, int8); }

T::Tensor Projection::operator()(const T::Tensor& x) const {
  return q ? (*q)(x) : T::matmul(x, w.f32().transpose(0, 1));
}

Projection Projection::to(const gizhw::gpu::Gpu& gpu) const {
  if (q) return {{}, q->to(gpu)};
  return {{w.f32().on(gpu)}, std::nullopt};  // F32 on the GPU: converted once
}

T::Tensor rmsNorm(const T::Tensor& x, const T::Tensor& w, double eps) {
  const T::Tensor ms = (T::lazy(x) * T::lazy(x)).eval().mean({-1}, true);
  return (T::lazy(x) * (T::lazy(ms) + T::Lazy(eps)).rsqrt() * T::lazy(w)).eval();
}

Rope ropeTables(const std::vector<double>& positions, const std::vector<int64_t>& axes, double theta) {
  int64_t half = 0;
  for (int64_t a : axes) half += a / 2;
  const size_t na = axes.size();
  const int64_t n = static_cast<int64_t>(positions.size() / na);
  std::vector<double> cosv, sinv;
  cosv.reserve(static_cast<size_t>(n * half));
  sinv.reserve(static_cast<size_t>(n * half));
  for (int64_t i = 0; i < n; ++i)
    for (size_t a = 0; a < na; ++a) {
      const int64_t dims = axes[a];
      const double p = positions[static_cast<size_t>(i) * na + a];
      for (int64_t j = 0; j < dims / 2; ++j) {
        const double angle = p * (1.0 / std::pow(theta, static_cast<double>(2 * j) / static_cast<double>(dims)));
        cosv.push_back(std::cos(angle));
        sinv.push_back(std::sin(angle));
      }
    }
  return {T::tensor({n, 1, half}, cosv), T::tensor({n, 1, half}, sinv)};
}

T::Tensor rotated(const T::Tensor& x, const Rope& r) {
  const int64_t n = x.size(0), h = x.size(1), d = x.size(2);
  const T::Tensor pairs = x.reshape({n, h, d / 2, 2});
  const T::Lazy a = T::lazy(pairs.slice(3, 0, 1).squeeze(3)), b = T::lazy(pairs.slice(3, 1, 2).squeeze(3));
  const T::Lazy c = T::lazy(r.cos), s = T::lazy(r.sin);
  const T::Tensor first = (a * c - b * s).eval(), second = (a * s + b * c).eval();
  return T::stack({first, second}, 3).reshape({n, h, d});
}

T::Tensor timeSinusoid(float t, int64_t dims) {
  const int64_t half = dims / 2;
  std::vector<double> freq(static_cast<size_t>(dims));
  for (int64_t i = 0; i < half; ++i) {
    const float f = std::exp(static_cast<float>(-std::log(10000.0)) * static_cast<float>(i) / static_cast<float>(half));
    const float arg = t * f;
    freq[static_cast<size_t>(i)] = std::cos(arg);
    freq[static_cast<size_t>(half + i)] = std::sin(arg);
  }
  return T::tensor({1, dims}, freq);
}

}  // namespace gizml::diffusion
