// Counter-based random numbers: Philox 4x32 with 10 rounds (Salmon et al., SC'11), keyed by a
// Key's 64-bit seed. Element i of a tensor is drawn from counter i alone, so the values do not
// depend on threads, blocks or devices.
#include <gizml/tensor.h>

#include <cmath>

#include "core/thread_pool.h"
#include "tensor/random.h"

namespace gizml::tensor {
namespace {

struct Block { uint32_t v[4]; };

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

Block philox(uint64_t counter, uint64_t seed, uint32_t stream) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = stream, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, c0, hi0, lo0);
    mulhilo(0xCD9E8D57u, c2, hi1, lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// 24 random bits to [0, 1).
inline float unit(uint32_t bits) { return static_cast<float>(bits >> 8) * 0x1p-24f; }

// Element i is value(i) computed in f32 (F32/F16/BF16, rounded to the dtype after) or, for
// F64, valueF64(i) in double from the same random bits.
template <class F, class G>
Tensor draw(const Shape& shape, DType dtype, const char* what, F&& value, G&& valueF64) {
  check(isFloat(dtype), std::string(what) + ": dtype " + dtypeName(dtype) + " is not a float type");
  if (dtype == DType::F64) {
    Tensor out = empty(shape, DType::F64);
    double* p = out.data<double>();
    core::parallelFor(out.numel(), 16384, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) p[i] = valueF64(static_cast<uint64_t>(i));
    });
    return out;
  }
  Tensor out = empty(shape, DType::F32);
  float* p = out.data<float>();
  core::parallelFor(out.numel(), 16384, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) p[i] = value(static_cast<uint64_t>(i));
  });
  return dtype == DType::F32 ? out : out.cast(dtype);
}

}  // namespace

Key Key::split(uint64_t index) const {
  const Block b = philox(index, seed, 0x5eedu);
  return Key((static_cast<uint64_t>(b.v[1]) << 32) | b.v[0]);
}

float uniformWord(const Key& key, uint64_t index) { return unit(philox(index, key.seed, 1).v[0]); }

Tensor uniform(const Key& key, const Shape& shape, double low, double high, DType dtype) {
  const float lo = static_cast<float>(low), span = static_cast<float>(high - low);
  return draw(shape, dtype, "uniform", [&](uint64_t i) { return lo + span * uniformWord(key, i); },
              [&](uint64_t i) { return low + (high - low) * static_cast<double>(uniformWord(key, i)); });
}

Tensor normal(const Key& key, const Shape& shape, double mean, double std, DType dtype) {
  const float m = static_cast<float>(mean), s = static_cast<float>(std);
  // Box-Muller on two uniforms of element i's own counter; u1 in (0, 1] keeps log finite.
  return draw(shape, dtype, "normal", [&](uint64_t i) {
    const Block b = philox(i, key.seed, 2);
    const float u1 = 1.0f - unit(b.v[0]), u2 = unit(b.v[1]);
    const float r = std::sqrt(-2.0f * std::log(u1));
    return m + s * r * std::cos(6.2831853071795865f * u2);
  }, [&](uint64_t i) {
    const Block b = philox(i, key.seed, 2);
    const double u1 = 1.0 - static_cast<double>(unit(b.v[0])), u2 = unit(b.v[1]);
    return mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  });
}

}  // namespace gizml::tensor
