// The AVX2 kernel of QuantMatrix (quant_panels.h): 8 output rows in the 8 lanes, up to 4
// activation rows at a time sharing each loaded (and, at 4 and 6 bits, unpacked) word of codes.
//
// maddubs multiplies the unsigned codes by the int8 activation codes (-127..127) and adds pairs
// into int16 lanes; those partial sums are added in int16 while they cannot overflow (at 4 bits a
// pair is at most 2 * 15 * 127 = 3810, so 8 products), then widened by madd into the group's int32
// sums. Per group and activation row: y += s * d * sum(q a) - s * z' * sum(a) for the 8 rows at
// once (quant_dot.h has the algebra).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/quant_dot_kernels.h"
#include "cpu/quant_panels.h"

// (clang ignores GCC's pragma: it takes the same targets as an attribute of every function.)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC target("avx2,fma")
#endif

namespace gizml::cpu::quant_kernels {
namespace {

// Activation rows in flight (each keeps a float and an int16 accumulator in a register).
constexpr int kMaxRows = 4;
// Activation rows per pass over a thread's panels: their codes stay in L2 while every panel
// passes over them.
constexpr int64_t kRowChunk = 64;

struct ActRows {
  const int8_t* codes[kMaxRows];
  const float* scale[kMaxRows];
  const float* sum[kMaxRows];
};

// The layout's word: its bytes, the columns it covers, and how many words' int16 sums may be
// added before widening (a product pair is at most 2 * 127 * (2^bits - 1)).
template <int Bits>
struct Word {
  static constexpr bool kTwoHalves = Bits == 4 || Bits == 6;
  static constexpr int64_t kBytes = Bits == 6 ? 48 : 32;
  static constexpr int64_t kCols = kTwoHalves ? 8 : 4;
  // (8 bits: |q - 128| <= 128, a pair at most 2 * 128 * 127.)
  static constexpr int kPerWiden =
      Bits == 8 ? 1 : std::max(1, 32767 / (2 * 127 * ((1 << Bits) - 1)) / (kTwoHalves ? 2 : 1));
  static constexpr float kCodeShift = Bits == 8 ? 128.0f : 0.0f;  // what the stored codes lack
};

// The word at p as one or two vectors of codes (byte 4i + j: row i, the half's column j).
template <int Bits>
inline void loadWord(const uint8_t* p, __m256i& first, __m256i& second) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (Word<Bits>::kTwoHalves) {
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
    second = v;  // unused
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

// Per group of panel p, the 8 rows' scales s and offsets s * z' (16 floats), from their exponent
// and zero-point bytes: made once per panel and pass over the activation rows, not per 4 rows.
template <int Bits>
void panelScales(const QuantMatrix& m, int64_t p, float* out) {
  const int64_t groups = m.cols() / m.group();
  const uint8_t* exponents = m.panelExponents(p);
  const float* fractions = exponentScaleFractions();
  const __m256 base = _mm256_set1_ps(m.scaleTable()[255]);
  const __m256 zeroStep = _mm256_set1_ps(static_cast<float>((1 << Bits) - 1) / 255.0f);
  for (int64_t g = 0; g < groups; ++g) {
    const __m128i ez = _mm_loadu_si128(reinterpret_cast<const __m128i*>(exponents + g * 16));
    const __m256 s = scalesOf(_mm256_cvtepu8_epi32(ez), fractions, base);
    const __m256 z = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(ez, ez)));
    _mm256_storeu_ps(out + g * 16, s);
    _mm256_storeu_ps(out + g * 16 + 8,
                     _mm256_mul_ps(s, _mm256_sub_ps(_mm256_mul_ps(z, zeroStep), _mm256_set1_ps(Word<Bits>::kCodeShift))));
  }
}

template <int Bits, int R>
void panelRows(const QuantMatrix& m, int64_t p, const float* scales, const ActRows& a, float* out[R]) {
  using W = Word<Bits>;
  const int64_t group = m.group(), groups = m.cols() / group, words = group / W::kCols;
  const uint8_t* codes = m.panelCodes(p);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m256i isum[R];
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    for (int64_t w0 = 0; w0 < words; w0 += W::kPerWiden) {
      __m256i part[R];
      for (int r = 0; r < R; ++r) part[r] = _mm256_setzero_si256();
      const int64_t wEnd = std::min<int64_t>(words, w0 + W::kPerWiden);
      for (int64_t w = w0; w < wEnd; ++w, codes += W::kBytes) {
        __m256i first, second;
        loadWord<Bits>(codes, first, second);
        const int64_t col = g * group + w * W::kCols;
        for (int r = 0; r < R; ++r) {
          int32_t a0;
          std::memcpy(&a0, a.codes[r] + col, 4);
          const __m256i av = _mm256_set1_epi32(a0);
          part[r] = _mm256_add_epi16(part[r], Bits == 8 ? _mm256_maddubs_epi16(_mm256_abs_epi8(first), _mm256_sign_epi8(av, first))
                                                        : _mm256_maddubs_epi16(first, av));
          if constexpr (W::kTwoHalves) {
            int32_t a1;
            std::memcpy(&a1, a.codes[r] + col + 4, 4);
            part[r] = _mm256_add_epi16(part[r], _mm256_maddubs_epi16(second, _mm256_set1_epi32(a1)));
          }
        }
      }
      for (int r = 0; r < R; ++r) isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(part[r], ones));
    }
    const __m256 s = _mm256_loadu_ps(scales + g * 16), offset = _mm256_loadu_ps(scales + g * 16 + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 sd = _mm256_mul_ps(s, _mm256_broadcast_ss(a.scale[r] + g));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), sd, acc[r]);
      acc[r] = _mm256_fnmadd_ps(offset, _mm256_broadcast_ss(a.sum[r] + g), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(out[r], acc[r]);
}

template <int Bits>
void panelsFor(const QuantMatrix& m, int64_t p0, int64_t p1, const QuantActs& x, float* y, int64_t ldy) {
  const int64_t groups = m.cols() / m.group();
  thread_local std::vector<float> scales;
  scales.resize(static_cast<size_t>(groups * 16));
  for (int64_t c0 = 0; c0 < x.rows; c0 += kRowChunk) {
    const int64_t c1 = std::min(x.rows, c0 + kRowChunk);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t o = 8 * p, valid = std::min<int64_t>(8, m.rows() - o);
      panelScales<Bits>(m, p, scales.data());
      for (int64_t r0 = c0; r0 < c1; r0 += kMaxRows) {
        const int n = static_cast<int>(std::min<int64_t>(kMaxRows, c1 - r0));
        ActRows a;
        float tail[kMaxRows][8];
        float* out[kMaxRows];
        for (int r = 0; r < n; ++r) {
          a.codes[r] = x.codes.data() + (r0 + r) * x.cols;
          a.scale[r] = x.scale.data() + (r0 + r) * groups;
          a.sum[r] = x.sum.data() + (r0 + r) * groups;
          out[r] = valid == 8 ? y + (r0 + r) * ldy + o : tail[r];
        }
        switch (n) {
          case 1: panelRows<Bits, 1>(m, p, scales.data(), a, out); break;
          case 2: panelRows<Bits, 2>(m, p, scales.data(), a, out); break;
          case 3: panelRows<Bits, 3>(m, p, scales.data(), a, out); break;
          default: panelRows<Bits, 4>(m, p, scales.data(), a, out); break;
        }
        if (valid < 8)
          for (int r = 0; r < n; ++r) std::copy(tail[r], tail[r] + valid, y + (r0 + r) * ldy + o);
      }
    }
  }
}

}  // namespace

void panelsAvx2(const QuantMatrix& m, int64_t p0, int64_t p1, const QuantActs& x, float* y, int64_t ldy) {
  switch (m.bits()) {
    case 2: return panelsFor<2>(m, p0, p1, x, y, ldy);
    case 3: return panelsFor<3>(m, p0, p1, x, y, ldy);
    case 4: return panelsFor<4>(m, p0, p1, x, y, ldy);
    case 5: return panelsFor<5>(m, p0, p1, x, y, ldy);
    case 6: return panelsFor<6>(m, p0, p1, x, y, ldy);
    case 7: return panelsFor<7>(m, p0, p1, x, y, ldy);
    default: return panelsFor<8>(m, p0, p1, x, y, ldy);
  }
}

}  // namespace gizml::cpu::quant_kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
