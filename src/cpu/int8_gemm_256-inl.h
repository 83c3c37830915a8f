// The 256-bit kernels of int8_gemm.h, included by int8_gemm_avx2.cpp (GIZML_INT8_VNNI 0) and
// int8_gemm_avxvnni.cpp (1) under their targets. "Broadcast form", as the AVX-512 kernel: the
// weight rows packed into panels of 8, each 32-byte vector one word (4 bytes) of the 8 rows, and
// each activation row's word broadcast to multiply all 8 at once. A micro-tile is 6 activation
// rows by two panels: 12 accumulators, the 2 weight vectors and the broadcast word fill the 16
// registers (AVX2: 5 rows, its product needing a register of its own before the add).
//  - AVX-VNNI: a word is 4 k, the activations a + 128 as unsigned bytes, vpdpbusd; 128 times each
//    weight row's sum comes off at the end.
//  - AVX2: a word is 2 k widened to i16, vpmaddwd (exact: maddubs' i16 pair sums could saturate).
// Its includes are in the including files too, before their targets (else the standard headers'
// inline functions would be compiled for the target and could be the copies the linker keeps).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/int8_gemm.h"

namespace gizml::cpu::int8_kernels {

namespace {

constexpr int kPanel = 8;
#if GIZML_INT8_VNNI
constexpr int kMaxRows = 6;
constexpr int64_t kPerWord = 4;  // k a word holds
inline uint32_t activationWord(const int8_t* row, int64_t p, int64_t k) {
  uint32_t v = 0;
  for (int64_t e = 0; e < kPerWord && p + e < k; ++e) v |= uint32_t{static_cast<uint8_t>(row[p + e] ^ 0x80)} << (8 * e);
  return v;
}
inline uint32_t weightWord(const int8_t* row, int64_t p, int64_t k) {
  uint32_t v = 0;
  for (int64_t e = 0; e < kPerWord && p + e < k; ++e) v |= uint32_t{static_cast<uint8_t>(row[p + e])} << (8 * e);
  return v;
}
// As inline assembly the accumulator is updated in place (from the intrinsic GCC 12 copies
// accumulators between registers every step); {vex}: AVX-VNNI's encoding, not AVX-512's.
inline __m256i multiplyAdd(__m256i acc, __m256i a, __m256i w) {
  asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(w));
  return acc;
}
// A gathered word (4 bytes of a row) as the panel holds it: as it is.
inline __m256i packedWord(__m256i v) { return v; }
#else
constexpr int kMaxRows = 5;  // vpmaddwd's product takes a register before its add: 10 accumulators
constexpr int64_t kPerWord = 2;
inline uint32_t activationWord(const int8_t* row, int64_t p, int64_t k) {
  uint32_t v = 0;
  for (int64_t e = 0; e < kPerWord && p + e < k; ++e)
    v |= uint32_t{static_cast<uint16_t>(int16_t{row[p + e]})} << (16 * e);
  return v;
}
inline uint32_t weightWord(const int8_t* row, int64_t p, int64_t k) { return activationWord(row, p, k); }
// In place, as the VNNI one (from the intrinsics GCC 12 spilled accumulators to the stack).
inline __m256i multiplyAdd(__m256i acc, __m256i a, __m256i w) {
  __m256i product;
  asm("vpmaddwd %3, %2, %1\n\tvpaddd %1, %0, %0" : "+x"(acc), "=&x"(product) : "x"(a), "x"(w));
  return acc;
}
// A gathered word (4 bytes of a row) as the panel holds it: its first two bytes widened to i16.
inline __m256i packedWord(__m256i v) {
  const __m256i low = _mm256_and_si256(_mm256_srai_epi32(_mm256_slli_epi32(v, 24), 24), _mm256_set1_epi32(0xFFFF));
  return _mm256_or_si256(low, _mm256_slli_epi32(_mm256_srai_epi32(_mm256_slli_epi32(v, 16), 24), 16));
}
#endif

struct Packed {
  int64_t words = 0;                // k in words
  std::vector<uint32_t> rows;       // [m / kMaxRows, words, kMaxRows]: zeros past k and m
  std::vector<uint32_t> panels;     // [n / 8, words, 8]: zeros past k and n
  std::vector<int32_t> weightSums;  // [panels x 8]: 128 times each weight row's sum (VNNI), else 0
};

// Rows [i, i + rows) of the outputs of panels `panel` and `panel` + 1: always kMaxRows rows and both
// panels (the packed operands are zero past m and n), stored where they are outputs. The
// accumulators are named variables: GCC keeps an array of them on the stack.
void tile(const Packed& x, int64_t i, int64_t rows, int64_t panel, int64_t q0, int64_t q1, int32_t* c, int64_t ldc,
          int64_t n) {
  const uint32_t* a = x.rows.data() + (i / kMaxRows * x.words + q0) * kMaxRows;
  const uint32_t* w0 = x.panels.data() + panel * x.words * kPanel;
  const uint32_t* w1 = w0 + x.words * kPanel;
#define GIZML_ACC(r) __m256i acc##r##0 = _mm256_setzero_si256(), acc##r##1 = _mm256_setzero_si256();
  GIZML_ACC(0) GIZML_ACC(1) GIZML_ACC(2) GIZML_ACC(3) GIZML_ACC(4)
#if GIZML_INT8_VNNI
  GIZML_ACC(5)
#endif
  for (int64_t q = q0; q < q1; ++q, a += kMaxRows) {
    const __m256i wv0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w0 + q * kPanel));
    const __m256i wv1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w1 + q * kPanel));
#define GIZML_STEP(r)                                                 \
  {                                                                   \
    const __m256i av = _mm256_set1_epi32(static_cast<int32_t>(a[r])); \
    acc##r##0 = multiplyAdd(acc##r##0, av, wv0);                      \
    acc##r##1 = multiplyAdd(acc##r##1, av, wv1);                      \
  }
    GIZML_STEP(0) GIZML_STEP(1) GIZML_STEP(2) GIZML_STEP(3) GIZML_STEP(4)
#if GIZML_INT8_VNNI
    GIZML_STEP(5)
#endif
  }
  const int64_t j0 = panel * kPanel, j1 = j0 + kPanel;
  const __m256i none = _mm256_setzero_si256();
  const __m256i sums0 = q0 > 0 ? none : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.weightSums.data() + j0));
  const __m256i sums1 = q0 > 0 ? none : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.weightSums.data() + j1));
  // The first piece of k takes the weight sums off; the others add to what the first stored.
  auto store = [&](int64_t r, int64_t j, __m256i v) {
    int32_t lanes[kPanel];
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), v);
    int32_t* out = c + (i + r) * ldc + j;
    for (int64_t e = 0; e < std::clamp<int64_t>(n - j, 0, kPanel); ++e)
      out[e] =
          q0 == 0 ? lanes[e] : static_cast<int32_t>(static_cast<uint32_t>(out[e]) + static_cast<uint32_t>(lanes[e]));
  };
#define GIZML_STORE(r)                                \
  if ((r) < rows) {                                   \
    store(r, j0, _mm256_sub_epi32(acc##r##0, sums0)); \
    store(r, j1, _mm256_sub_epi32(acc##r##1, sums1)); \
  }
  GIZML_STORE(0) GIZML_STORE(1) GIZML_STORE(2) GIZML_STORE(3) GIZML_STORE(4)
#if GIZML_INT8_VNNI
  GIZML_STORE(5)
#endif
#undef GIZML_ACC
#undef GIZML_STEP
#undef GIZML_STORE
}

}  // namespace

void GIZML_INT8_ENTRY(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* w, int64_t ldw,
                      int32_t* c, int64_t ldc) {
  Packed x;
  x.words = (k + kPerWord - 1) / kPerWord;
  const int64_t rowGroups = (m + kMaxRows - 1) / kMaxRows;
  const int64_t panels = (n + 2 * kPanel - 1) / (2 * kPanel) * 2;  // in pairs, as the tiles read them
  x.rows.assign(static_cast<size_t>(rowGroups * x.words * kMaxRows), 0);
  x.panels.assign(static_cast<size_t>(panels * x.words * kPanel), 0);
  x.weightSums.assign(static_cast<size_t>(panels * kPanel), 0);
  core::parallelFor(m, 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      uint32_t* out = x.rows.data() + i / kMaxRows * x.words * kMaxRows + i % kMaxRows;
      for (int64_t q = 0; q < x.words; ++q) out[q * kMaxRows] = activationWord(a + i * lda, q * kPerWord, k);
    }
  });
  // A panel's words gathered 8 rows at a time (one 32-byte store each), AVX-VNNI's row sums from
  // the same vectors (vpdpbusd of ones); the words whose 4-byte read would pass k by hand.
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i offsets = _mm256_mullo_epi32(lane, _mm256_set1_epi32(static_cast<int32_t>(ldw)));
  const int64_t gathered = k >= 4 ? (k - 4) / kPerWord + 1 : 0;  // words whose 4 bytes lie within k
  core::parallelFor(panels, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < std::min(p1, (n + kPanel - 1) / kPanel); ++p) {
      const int64_t live = std::min<int64_t>(kPanel, n - p * kPanel);
      const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(live)), lane);
      const int8_t* rows = w + p * kPanel * ldw;
      uint32_t* out = x.panels.data() + p * x.words * kPanel;
#if GIZML_INT8_VNNI
      __m256i sums = _mm256_setzero_si256();
#endif
      auto put = [&](int64_t q, __m256i word) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + q * kPanel), word);
#if GIZML_INT8_VNNI
        sums = multiplyAdd(sums, _mm256_set1_epi8(1), word);
#endif
      };
      for (int64_t q = 0; q < gathered; ++q) {
        const __m256i v = _mm256_mask_i32gather_epi32(
            _mm256_setzero_si256(), reinterpret_cast<const int*>(rows + q * kPerWord), offsets, lanes, 1);
        put(q, packedWord(v));
      }
      for (int64_t q = gathered; q < x.words; ++q) {
        uint32_t word[kPanel] = {};
        for (int64_t r = 0; r < live; ++r) word[r] = weightWord(rows + r * ldw, q * kPerWord, k);
        put(q, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(word)));
      }
#if GIZML_INT8_VNNI
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(x.weightSums.data() + p * kPanel), _mm256_slli_epi32(sums, 7));
#endif
    }
  });
  forEachTile(
      m, panels, x.words, kMaxRows, kPanel * 4,
      [&](int64_t i, int64_t rows, int64_t p, int64_t q0, int64_t q1) { tile(x, i, rows, p, q0, q1, c, ldc, n); });
}

}  // namespace gizml::cpu::int8_kernels
