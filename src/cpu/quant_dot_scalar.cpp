// The portable kernel of quantDot: plain integer sums, the reference the SIMD kernels are tested
// against (bit for bit) and the path for groups that are not multiples of 8 and CPUs without AVX2.
// Its float steps per group are the panels' (quant_dot.h): s * d, then two fmas.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "cpu/quant_dot_kernels.h"

namespace gizml::cpu::quant_kernels {

void dotScalar(const QuantWeights& w, int64_t o0, int64_t o1, const QuantActs& x, float* y, int64_t ldy) {
  const int64_t groups = w.cols / w.group, blockBytes = 2 + w.group * w.bits / 8;
  const int shift = codeShift(w.bits);
  std::vector<uint8_t> q(static_cast<std::size_t>(w.group));
  for (int64_t o = o0; o < o1; ++o) {
    for (int64_t r = 0; r < x.rows; ++r) y[r * ldy + o] = 0.0f;
    const uint8_t* block = w.data + o * w.rowBytes;
    for (int64_t g = 0; g < groups; ++g, block += blockBytes) {
      const float s = w.scales[block[0]];
      const float offset = s * (static_cast<float>(block[1]) * zeroStep(w.bits) - static_cast<float>(shift));
      unpackCodes(block + 2, w.group, w.bits, q.data());
      for (int64_t r = 0; r < x.rows; ++r) {
        const int8_t* a = x.codes.data() + r * x.cols + g * w.group;
        int32_t dot = 0;
        for (int64_t i = 0; i < w.group; ++i) dot += (static_cast<int32_t>(q[static_cast<std::size_t>(i)]) - shift) * a[i];
        const std::size_t at = static_cast<std::size_t>(r * groups + g);
        float& out = y[r * ldy + o];
        out = std::fma(static_cast<float>(dot), s * x.scale[at], out);
        out = std::fma(-offset, x.sum[at], out);
      }
    }
  }
}

}  // namespace gizml::cpu::quant_kernels

namespace gizml::cpu {

void unpackCodes(const uint8_t* in, int64_t n, int bits, uint8_t* q) {
  const uint64_t mask = (1u << bits) - 1;
  // Eight codes are `bits` whole bytes: one little-endian word holds them.
  for (int64_t i = 0; i < n; i += 8, in += bits) {
    uint64_t v = 0;
    std::memcpy(&v, in, static_cast<size_t>(bits));
    for (int j = 0; j < 8; ++j) q[i + j] = static_cast<uint8_t>((v >> (j * bits)) & mask);
  }
}

}  // namespace gizml::cpu
