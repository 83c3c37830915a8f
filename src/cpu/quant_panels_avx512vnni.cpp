// QuantMatrix's AVX-512 VNNI kernel (quant_panels.h) on 16-row panels: 16 output rows in the 16
// lanes of a 512-bit register, up to 8 activation rows at a time sharing each loaded (and, at 4
// and 6 bits, unpacked) word of codes. vpdpbusd multiplies the unsigned codes by the int8
// activation codes and adds each lane's four products into int32 (exact: no int16 pairs to
// saturate); 8-bit codes, stored as q - 128, go in as |q - 128| against the activation carrying
// their sign, as in the AVX2 kernel, so that every kernel sums the same integers. Per group and
// activation row: y = fma(n, s * d, y); y = fma(-s z', sum(a), y) (quant_dot.h: the order every
// kernel shares, bit for bit).
// The headers come before the target, so that their inline functions stay baseline code.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/quant_dot_kernels.h"
#include "cpu/quant_panels.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni"))), apply_to = function)
#else
#pragma GCC target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")
// GCC 12's AVX-512 headers make their "undefined" vectors as `__m512i y = y;`, which -Wall
// reports at every inlined use (a false positive of the headers, not of this code).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace gizml::cpu::quant_kernels {
namespace {

constexpr int64_t kPanel = 16;
// Activation rows in flight: 8 float and 8 integer accumulators (32 registers). Each loaded and
// unpacked word of codes then serves 8 rows, and the group's scaling per row stays the same.
constexpr int kRows = kBlockRows;
using Rows = ActRows;

// A step covers 8 columns: one word of two halves (4 and 6 bits) or two words of one code a byte.
template <int Bits>
struct Step {
  static constexpr bool kTwoHalves = Bits == 4 || Bits == 6;
  static constexpr int64_t kBytes = Bits == 6 ? 96 : Bits == 4 ? 64 : 128;
  static constexpr float kCodeShift = static_cast<float>(codeShift(Bits));
};

// The step at p as two vectors of codes (byte 4i + j: row i, column j of the step's first and
// second 4 columns).
template <int Bits>
inline void loadStep(const uint8_t* p, __m512i& first, __m512i& second) {
  const __m512i v = _mm512_loadu_si512(p);
  if constexpr (Step<Bits>::kTwoHalves) {
    const __m512i nibble = _mm512_set1_epi8(15);
    first = _mm512_and_si512(v, nibble);
    second = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
    if constexpr (Bits == 6) {
      // Top bits: the low half of `top` serves vector bytes 0..31, the high (shifted by 2) 32..63.
      const __m256i t = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64));
      const __m512i top = _mm512_inserti64x4(_mm512_castsi256_si512(t), _mm256_srli_epi16(t, 2), 1);
      first = _mm512_or_si512(first, _mm512_slli_epi16(_mm512_and_si512(top, _mm512_set1_epi8(0x03)), 4));
      second = _mm512_or_si512(second, _mm512_and_si512(top, _mm512_set1_epi8(0x30)));
    }
  } else {
    first = v;
    second = _mm512_loadu_si512(p + 64);
  }
}

// What groupScales needs of a matrix, loaded once per panel: the 32-entry table of 2^(lo/32) in
// two registers, the base scale, the zero points' step and the code shift.
struct ScaleConstants {
  __m512 low, high, base, step, shift;
};

template <int Bits>
ScaleConstants scaleConstants(const QuantMatrix& m) {
  const float* fractions = exponentScaleFractions();
  return {_mm512_loadu_ps(fractions), _mm512_loadu_ps(fractions + 16), _mm512_set1_ps(m.scaleTable()[255]),
          _mm512_set1_ps(zeroStep(Bits)), _mm512_set1_ps(Step<Bits>::kCodeShift)};
}

// A group's 16 rows' scales s and offsets s * (z' - shift) from its 16 exponent and 16 zero-point
// bytes at ez: the AVX2 kernel's arithmetic, with the table in one two-register permute.
inline void groupScales(const uint8_t* ez, const ScaleConstants& k, __m512& s, __m512& offset) {
  const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ez));
  const __m512i u = _mm512_add_epi32(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(bytes)), _mm512_set1_epi32(1));
  const __m512 f = _mm512_permutex2var_ps(k.low, _mm512_and_si512(u, _mm512_set1_epi32(31)), k.high);
  const __m512 pow2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_srli_epi32(u, 5), _mm512_set1_epi32(119)), 23));
  s = _mm512_mul_ps(k.base, _mm512_mul_ps(f, pow2));
  const __m512 z = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(bytes, 1)));
  offset = _mm512_mul_ps(s, _mm512_sub_ps(_mm512_mul_ps(z, k.step), k.shift));
}

// Per group of panel p, the 16 rows' scales and offsets (32 floats): made once per panel and pass
// over the activation rows.
template <int Bits>
void panelScales(const QuantMatrix& m, int64_t p, float* out) {
  const int64_t groups = m.cols() / m.group();
  const uint8_t* exponents = m.panelExponents(p);
  const ScaleConstants k = scaleConstants<Bits>(m);
  for (int64_t g = 0; g < groups; ++g) {
    __m512 s, offset;
    groupScales(exponents + g * 2 * kPanel, k, s, offset);
    _mm512_storeu_ps(out + g * 2 * kPanel, s);
    _mm512_storeu_ps(out + g * 2 * kPanel + kPanel, offset);
  }
}

// The panel's outputs for R activation rows, with each group's scales from `scales` (panelScales)
// or, with scales null (a single activation row: decode), made from the exponents as the group
// comes, which spares a pass over them and its stores and loads. Below 4 rows each row's integer
// sums go in two chains (the first and second halves of each step: vpdpbusd's latency would
// otherwise bound them), from 4 rows in one.
// Steps: a group's steps when known at compile time (the default group of 32: 4), else 0. Stride:
// the rows interleaved in `a` (Rows), of which the first R are summed.
template <int Bits, int R, int Steps, int Stride>
void panelRows(const QuantMatrix& m, int64_t p, const float* scales, const Rows& a, float* out[R], __mmask16 valid) {
  constexpr bool kTwoChains = R < 4;
  using S = Step<Bits>;
  // Only a decode makes scales here (the loads of its constants are per panel).
  const ScaleConstants k = scales == nullptr ? scaleConstants<Bits>(m) : ScaleConstants{};
  const uint8_t* exponents = m.panelExponents(p);
  const int64_t group = m.group(), groups = m.cols() / group, steps = Steps > 0 ? Steps : group / 8;
  const uint8_t* codes = m.panelCodes(p);
  const int64_t ahead = codePrefetchBytes();
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    prefetchCodes(codes, steps * S::kBytes, ahead);
    __m512i isum[R], second[kTwoChains ? R : 1];
    for (int r = 0; r < R; ++r) isum[r] = _mm512_setzero_si512();
    if constexpr (kTwoChains)
      for (int r = 0; r < R; ++r) second[r] = _mm512_setzero_si512();
    for (int64_t s = 0, col = g * group; s < steps; ++s, codes += S::kBytes, col += 8) {
      __m512i u0, u1;
      loadStep<Bits>(codes, u0, u1);
      __mmask64 negative0 = 0, negative1 = 0;
      if constexpr (Bits == 8) {
        negative0 = _mm512_movepi8_mask(u0), negative1 = _mm512_movepi8_mask(u1);
        u0 = _mm512_abs_epi8(u0), u1 = _mm512_abs_epi8(u1);
      }
      const int8_t* words = a.codes + col * Stride;  // the step's two words of each row
      for (int r = 0; r < R; ++r) {
        int32_t a0, a1;
        std::memcpy(&a0, words + 4 * r, 4);
        std::memcpy(&a1, words + 4 * (Stride + r), 4);
        __m512i s0 = _mm512_set1_epi32(a0), s1 = _mm512_set1_epi32(a1);
        if constexpr (Bits == 8) {
          s0 = _mm512_mask_sub_epi8(s0, negative0, _mm512_setzero_si512(), s0);
          s1 = _mm512_mask_sub_epi8(s1, negative1, _mm512_setzero_si512(), s1);
        }
        isum[r] = _mm512_dpbusd_epi32(isum[r], u0, s0);
        if constexpr (kTwoChains) second[r] = _mm512_dpbusd_epi32(second[r], u1, s1);
        else isum[r] = _mm512_dpbusd_epi32(isum[r], u1, s1);
      }
    }
    __m512 sv, offset;
    if (scales != nullptr) {
      sv = _mm512_loadu_ps(scales + g * 2 * kPanel);
      offset = _mm512_loadu_ps(scales + g * 2 * kPanel + kPanel);
    } else {
      groupScales(exponents + g * 2 * kPanel, k, sv, offset);
    }
    for (int r = 0; r < R; ++r) {
      const __m512 sd = _mm512_mul_ps(sv, _mm512_set1_ps(a.scale[g * Stride + r]));
      __m512i n = isum[r];
      if constexpr (kTwoChains) n = _mm512_add_epi32(n, second[r]);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(n), sd, acc[r]);
      acc[r] = _mm512_fnmadd_ps(offset, _mm512_set1_ps(a.sum[g * Stride + r]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(out[r], valid, acc[r]);
}

template <int Bits, int Steps>
void panelsFor(const QuantMatrix& m, int64_t p0, int64_t p1, const QuantActs& x, const BlockedActs& blocked, float* y,
               int64_t ldy) {
  const int64_t groups = m.cols() / m.group();
  if (x.rows == 1) {
    const Rows a{x.codes.data(), x.scale.data(), x.sum.data()};
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t o = kPanel * p;
      // The last panel's missing rows are not stored (they may lie past y's row).
      const auto valid = static_cast<__mmask16>((1u << std::min<int64_t>(kPanel, m.rows() - o)) - 1);
      float* out[1] = {y + o};
      panelRows<Bits, 1, Steps, 1>(m, p, nullptr, a, out, valid);
    }
    return;
  }
  thread_local std::vector<float> scales;
  scales.resize(static_cast<size_t>(groups * 2 * kPanel));
  for (int64_t c0 = 0; c0 < x.rows; c0 += kRowChunk) {
    const int64_t c1 = std::min(x.rows, c0 + kRowChunk);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t o = kPanel * p;
      const auto valid = static_cast<__mmask16>((1u << std::min<int64_t>(kPanel, m.rows() - o)) - 1);
      panelScales<Bits>(m, p, scales.data());
      for (int64_t r0 = c0; r0 < c1; r0 += kRows) {
        const int n = static_cast<int>(std::min<int64_t>(kRows, c1 - r0));
        const int64_t b = r0 / kRows;
        const Rows a{blocked.codes.data() + b * kRows * x.cols, blocked.scale.data() + b * kRows * groups,
                     blocked.sum.data() + b * kRows * groups};
        float* out[kRows];
        for (int r = 0; r < n; ++r) out[r] = y + (r0 + r) * ldy + o;
        switch (n) {
          case 1: panelRows<Bits, 1, Steps, kRows>(m, p, scales.data(), a, out, valid); break;
          case 2: panelRows<Bits, 2, Steps, kRows>(m, p, scales.data(), a, out, valid); break;
          case 3: panelRows<Bits, 3, Steps, kRows>(m, p, scales.data(), a, out, valid); break;
          case 4: panelRows<Bits, 4, Steps, kRows>(m, p, scales.data(), a, out, valid); break;
          case 5: panelRows<Bits, 5, Steps, kRows>(m, p, scales.data(), a, out, valid); break;
          case 6: panelRows<Bits, 6, Steps, kRows>(m, p, scales.data(), a, out, valid); break;
          case 7: panelRows<Bits, 7, Steps, kRows>(m, p, scales.data(), a, out, valid); break;
          default: panelRows<Bits, 8, Steps, kRows>(m, p, scales.data(), a, out, valid); break;
        }
      }
    }
  }
}

}  // namespace

void panelsAvx512Vnni(const QuantMatrix& m, int64_t p0, int64_t p1, const QuantActs& x, const BlockedActs& blocked,
                      float* y, int64_t ldy) {
  withCodeWidth(m, [&]<int Bits, int Steps>() { panelsFor<Bits, Steps>(m, p0, p1, x, blocked, y, ldy); });
}

}  // namespace gizml::cpu::quant_kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
