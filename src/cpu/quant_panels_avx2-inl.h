// The 256-bit kernels of QuantMatrix (quant_panels.h), on 8-row panels: 8 output rows in the 8
// lanes, up to 4 activation rows at a time sharing each loaded (and, at 4 and 6 bits, unpacked)
// word of codes. Included by quant_panels_avx2.cpp (GIZML_PANELS_VNNI 0) and
// quant_panels_avxvnni.cpp (1), each under its target, defining GIZML_PANELS_ENTRY.
//
// AVX2: maddubs multiplies the unsigned codes by the int8 activation codes (-127..127) and adds
// pairs into int16 lanes; those partial sums are added in int16 while they cannot overflow (at 4
// bits a pair is at most 2 * 15 * 127 = 3810, so 8 products), then widened by madd into the
// group's int32 sums. AVX-VNNI: vpdpbusd does the same products and adds each lane's four into
// int32 at once (no saturation, no widening). Either way the group's integer sums are exact, and
// then per group and activation row: y = fma(n, s * d, y); y = fma(-s z', sum(a), y) for the 8
// rows at once (quant_dot.h has the order, which the portable kernel shares bit for bit).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/quant_dot_kernels.h"
#include "cpu/quant_panels.h"

namespace gizml::cpu::quant_kernels {
namespace {

// A step of the layout covers 8 columns: one word of two halves (4 and 6 bits) or two words of
// one code a byte. Its bytes, and (AVX2) how many steps' int16 sums may be added before
// widening: a product pair is at most 2 * 127 * (2^bits - 1), or 2 * 128 * 127 at 8 bits.
template <int Bits>
struct Step {
  static constexpr bool kTwoHalves = Bits == 4 || Bits == 6;
  static constexpr int64_t kBytes = Bits == 6 ? 48 : Bits == 4 ? 32 : 64;
  static constexpr int kProductsPerWiden = 32767 / (2 * 127 * (Bits == 8 ? 128 : (1 << Bits) - 1));
  static constexpr float kCodeShift = static_cast<float>(codeShift(Bits));
};

// The step at p as two vectors of codes (byte 4i + j: row i, column j of the step's first and
// second 4 columns).
template <int Bits>
inline void loadStep(const uint8_t* p, __m256i& first, __m256i& second) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (Step<Bits>::kTwoHalves) {
    const __m256i nibble = _mm256_set1_epi8(15);
    first = _mm256_and_si256(v, nibble);
    second = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
    if constexpr (Bits == 6) {
      // Top bits: lane 0 of `top` serves vector bytes 0..15, lane 1 (shifted by 2) bytes 16..31.
      const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32));
      const __m256i top = _mm256_set_m128i(_mm_srli_epi16(t, 2), t);
      first = _mm256_or_si256(first, _mm256_slli_epi16(_mm256_and_si256(top, _mm256_set1_epi8(0x03)), 4));
      second = _mm256_or_si256(second, _mm256_and_si256(top, _mm256_set1_epi8(0x30)));
    }
  } else {
    first = v;
    second = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32));
  }
}

// exponentScale(base, e) of 8 exponents: 2^(lo/32) from the 32-entry table (four 8-entry
// permutes, picked by lo's bits 3 and 4) times 2^(hi - 8) built in the exponent field (a gather
// from the 256 scales instead cost a third of decode in its latency).
inline __m256 scalesOf(__m256i e, const float* fractions, __m256 base) {
  const __m256i u = _mm256_add_epi32(e, _mm256_set1_epi32(1));
  const __m256i lo = _mm256_and_si256(u, _mm256_set1_epi32(31));
  const __m256 bit3 = _mm256_castsi256_ps(_mm256_slli_epi32(lo, 28)), bit4 = _mm256_castsi256_ps(_mm256_slli_epi32(lo, 27));
  const auto part = [&](int k) { return _mm256_permutevar8x32_ps(_mm256_loadu_ps(fractions + 8 * k), lo); };
  const __m256 f = _mm256_blendv_ps(_mm256_blendv_ps(part(0), part(1), bit3), _mm256_blendv_ps(part(2), part(3), bit3), bit4);
  const __m256 pow2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_srli_epi32(u, 5), _mm256_set1_epi32(119)), 23));
  return _mm256_mul_ps(base, _mm256_mul_ps(f, pow2));
}

// A group's 8 rows' scales s and offsets s * (z' - shift) from its 8 exponent and 8 zero-point
// bytes at ez.
template <int Bits>
inline void groupScales(const uint8_t* ez, const float* fractions, __m256 base, __m256& s, __m256& offset) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ez));
  s = scalesOf(_mm256_cvtepu8_epi32(bytes), fractions, base);
  const __m256 z = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(bytes, bytes)));
  offset = _mm256_mul_ps(s, _mm256_sub_ps(_mm256_mul_ps(z, _mm256_set1_ps(zeroStep(Bits))),
                                          _mm256_set1_ps(Step<Bits>::kCodeShift)));
}

// Per group of panel p, the 8 rows' scales and offsets (16 floats): made once per panel and pass
// over the activation rows.
template <int Bits>
void panelScales(const QuantMatrix& m, int64_t p, float* out) {
  const int64_t groups = m.cols() / m.group();
  const uint8_t* exponents = m.panelExponents(p);
  const __m256 base = _mm256_set1_ps(m.scaleTable()[255]);
  for (int64_t g = 0; g < groups; ++g) {
    __m256 s, offset;
    groupScales<Bits>(exponents + g * 16, exponentScaleFractions(), base, s, offset);
    _mm256_storeu_ps(out + g * 16, s);
    _mm256_storeu_ps(out + g * 16 + 8, offset);
  }
}

// The integer sums of one group: `steps` steps of codes (advanced past them) against the
// activation codes from column col of each row (Stride rows interleaved in `a`).
template <int Bits, int R, int Stride>
inline void groupSums(const uint8_t*& codes, int64_t steps, int64_t col, const ActRows& a, __m256i isum[R]) {
  using S = Step<Bits>;
#if GIZML_PANELS_VNNI
  __m256i second[R];  // the second halves' sums (two chains halve vpdpbusd's latency)
  for (int r = 0; r < R; ++r) isum[r] = second[r] = _mm256_setzero_si256();
  constexpr int64_t kPerWiden = 1;  // vpdpbusd sums into int32 directly
#else
  // One int32 chain a row: an add a step, off maddubs' path (a second chain a row spilled the
  // 8-bit sums of 4 rows to the stack: 16 ymm registers).
  for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
  constexpr int64_t kPerWiden = std::max(1, S::kProductsPerWiden / 2);
  const __m256i ones = _mm256_set1_epi16(1);
#endif
  for (int64_t s0 = 0; s0 < steps; s0 += kPerWiden) {
#if !GIZML_PANELS_VNNI
    __m256i part[R];
    for (int r = 0; r < R; ++r) part[r] = _mm256_setzero_si256();
#endif
    const int64_t sEnd = std::min(steps, s0 + kPerWiden);
    for (int64_t s = s0; s < sEnd; ++s, codes += S::kBytes, col += 8) {
      __m256i u0, u1;
      loadStep<Bits>(codes, u0, u1);
      const __m256i w0 = u0, w1 = u1;
      if constexpr (Bits == 8) u0 = _mm256_abs_epi8(w0), u1 = _mm256_abs_epi8(w1);
      const int8_t* words = a.codes + col * Stride;  // the step's two words of each row
      for (int r = 0; r < R; ++r) {
        int32_t a0, a1;
        std::memcpy(&a0, words + 4 * r, 4);
        std::memcpy(&a1, words + 4 * (Stride + r), 4);
        __m256i s0v = _mm256_set1_epi32(a0), s1v = _mm256_set1_epi32(a1);
        if constexpr (Bits == 8) s0v = _mm256_sign_epi8(s0v, w0), s1v = _mm256_sign_epi8(s1v, w1);
#if GIZML_PANELS_VNNI
        isum[r] = _mm256_dpbusd_avx_epi32(isum[r], u0, s0v);
        second[r] = _mm256_dpbusd_avx_epi32(second[r], u1, s1v);
#else
        const __m256i p0 = _mm256_maddubs_epi16(u0, s0v), p1 = _mm256_maddubs_epi16(u1, s1v);
        if constexpr (S::kProductsPerWiden >= 2) {
          part[r] = _mm256_add_epi16(part[r], _mm256_add_epi16(p0, p1));
        } else {
          isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(_mm256_madd_epi16(p0, ones), _mm256_madd_epi16(p1, ones)));
        }
#endif
      }
    }
#if !GIZML_PANELS_VNNI
    if constexpr (S::kProductsPerWiden >= 2)
      for (int r = 0; r < R; ++r) isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(part[r], ones));
#endif
  }
#if GIZML_PANELS_VNNI
  for (int r = 0; r < R; ++r) isum[r] = _mm256_add_epi32(isum[r], second[r]);
#endif
}

// The panel's outputs for R activation rows, with each group's scales from `scales` (panelScales)
// or, with scales null (a single activation row: decode), made from the exponents as the group
// comes, which spares a pass over them and its stores and loads. Steps: a group's steps when known
// at compile time (the default group of 32: 4), else 0; Stride: the rows interleaved in `a`.
template <int Bits, int R, int Steps, int Stride>
void panelRows(const QuantMatrix& m, int64_t p, const float* scales, const ActRows& a, float* out[R]) {
  const int64_t group = m.group(), groups = m.cols() / group, steps = Steps > 0 ? Steps : group / 8;
  const uint8_t* codes = m.panelCodes(p);
  const uint8_t* exponents = m.panelExponents(p);
  const float* fractions = exponentScaleFractions();
  const __m256 base = _mm256_set1_ps(m.scaleTable()[255]);
  const int64_t ahead = codePrefetchBytes();
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    prefetchCodes(codes, steps * Step<Bits>::kBytes, ahead);
    __m256i isum[R];
    groupSums<Bits, R, Stride>(codes, steps, g * group, a, isum);
    __m256 s, offset;
    if (scales != nullptr) {
      s = _mm256_loadu_ps(scales + g * 16);
      offset = _mm256_loadu_ps(scales + g * 16 + 8);
    } else {
      groupScales<Bits>(exponents + g * 16, fractions, base, s, offset);
    }
    for (int r = 0; r < R; ++r) {
      const __m256 sd = _mm256_mul_ps(s, _mm256_broadcast_ss(a.scale + g * Stride + r));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), sd, acc[r]);
      acc[r] = _mm256_fnmadd_ps(offset, _mm256_broadcast_ss(a.sum + g * Stride + r), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(out[r], acc[r]);
}

template <int Bits, int Steps>
void panelsFor(const QuantMatrix& m, int64_t p0, int64_t p1, const QuantActs& x, const BlockedActs& blocked, float* y,
               int64_t ldy) {
  const int64_t groups = m.cols() / m.group();
  thread_local std::vector<float> scales;
  scales.resize(static_cast<size_t>(groups * 16));
  const ActRows row{x.codes.data(), x.scale.data(), x.sum.data()};  // a single row (decode)
  for (int64_t c0 = 0; c0 < x.rows; c0 += kRowChunk) {
    const int64_t c1 = std::min(x.rows, c0 + kRowChunk);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t o = 8 * p, valid = std::min<int64_t>(8, m.rows() - o);
      if (x.rows == 1 && valid == 8) {
        float* out[1] = {y + o};
        panelRows<Bits, 1, Steps, 1>(m, p, nullptr, row, out);
        continue;
      }
      panelScales<Bits>(m, p, scales.data());
      for (int64_t r0 = c0; r0 < c1; r0 += kMaxRows) {
        const int n = static_cast<int>(std::min<int64_t>(kMaxRows, c1 - r0));
        float tail[kMaxRows][8];
        float* out[kMaxRows];
        for (int r = 0; r < n; ++r) out[r] = valid == 8 ? y + (r0 + r) * ldy + o : tail[r];
        if (x.rows == 1) {
          panelRows<Bits, 1, Steps, 1>(m, p, scales.data(), row, out);
        } else {
          // The block's first or second kMaxRows rows (kRowChunk is whole blocks).
          const int64_t b = r0 / kBlockRows, within = r0 % kBlockRows;
          const ActRows a{blocked.codes.data() + b * kBlockRows * x.cols + 4 * within,
                          blocked.scale.data() + b * kBlockRows * groups + within,
                          blocked.sum.data() + b * kBlockRows * groups + within};
          switch (n) {
            case 1: panelRows<Bits, 1, Steps, kBlockRows>(m, p, scales.data(), a, out); break;
            case 2: panelRows<Bits, 2, Steps, kBlockRows>(m, p, scales.data(), a, out); break;
            case 3: panelRows<Bits, 3, Steps, kBlockRows>(m, p, scales.data(), a, out); break;
            default: panelRows<Bits, 4, Steps, kBlockRows>(m, p, scales.data(), a, out); break;
          }
        }
        if (valid < 8)
          for (int r = 0; r < n; ++r) std::copy(tail[r], tail[r] + valid, y + (r0 + r) * ldy + o);
      }
    }
  }
}

}  // namespace

void GIZML_PANELS_ENTRY(const QuantMatrix& m, int64_t p0, int64_t p1, const QuantActs& x, const BlockedActs& blocked,
                        float* y, int64_t ldy) {
  withCodeWidth(m, [&]<int Bits, int Steps>() { panelsFor<Bits, Steps>(m, p0, p1, x, blocked, y, ldy); });
}

}  // namespace gizml::cpu::quant_kernels
