// int8_gemm.h's AVX-512 VNNI kernel, in "broadcast form" (as oneDNN's): the weight rows packed
// into panels of 16, each 64-byte vector four k of the 16 rows (row r's bytes at 4r), so that one
// vpdpbusd of a row's four activation bytes broadcast adds into 16 outputs at once and nothing is
// summed across lanes. A micro-tile is up to 12 activation rows by two panels (24 accumulators of
// the 32 registers); the activations go in as a + 128, interleaved 12 rows a word so that one
// pointer reaches a step's 12 words, and 128 times each weight row's sum comes off.
// The headers come before the target, so that their inline functions stay baseline code.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/int8_gemm.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni"))), \
                             apply_to = function)
#else
#pragma GCC target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")
// GCC 12's AVX-512 headers make their "undefined" vectors as `__m512i y = y;`, a false positive
// of the headers at every inlined use.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace gizml::cpu::int8_kernels {

namespace {

constexpr int kPanel = 16, kMaxRows = 12;

struct Packed {
  int64_t k4 = 0;                   // k rounded up to 4, in words of 4 bytes
  std::vector<uint8_t> rows;        // [m / 12, k4, 12, 4]: a + 128 in blocks of 12 rows, zeros past k and m
  std::vector<uint8_t> panels;      // [n / 16, k4, 64]: the weight rows interleaved, zeros past k and n
  std::vector<int32_t> weightSums;  // [panels x 16]: 128 times each weight row's sum (mod 2^32)
};

// acc += the four products a u8 x w s8 in each lane. As inline assembly, the accumulator is
// updated in place: from the intrinsic GCC 12 copies every accumulator between registers (and to
// the stack) each step, which halved the kernel's speed.
inline void multiplyAdd(__m512i& acc, __m512i a, __m512i w) { asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(w)); }

// Rows [i, i + rows) of the outputs of panels `panel` and `panel` + 1: always the 12 rows of a
// block and both panels (the packed operands are zero past m and n), stored only where they are
// outputs. The 24 accumulators are named variables, not an array: GCC keeps an array of them on the
// stack.
void tile(const Packed& x, int64_t i, int64_t rows, int64_t panel, int64_t q0, int64_t q1, int32_t* c, int64_t ldc,
          int64_t n) {
  const uint8_t* a = x.rows.data() + (i / kMaxRows * x.k4 + q0) * kMaxRows * 4;
  const uint8_t* w0 = x.panels.data() + panel * x.k4 * 64;
  const uint8_t* w1 = w0 + x.k4 * 64;
#define GIZML_ACC(r) __m512i acc##r##0 = _mm512_setzero_si512(), acc##r##1 = _mm512_setzero_si512();
  GIZML_ACC(0) GIZML_ACC(1) GIZML_ACC(2) GIZML_ACC(3) GIZML_ACC(4) GIZML_ACC(5)
  GIZML_ACC(6) GIZML_ACC(7) GIZML_ACC(8) GIZML_ACC(9) GIZML_ACC(10) GIZML_ACC(11)
  for (int64_t q = q0; q < q1; ++q, a += kMaxRows * 4) {
    const __m512i wv0 = _mm512_loadu_si512(w0 + q * 64), wv1 = _mm512_loadu_si512(w1 + q * 64);
#define GIZML_STEP(r)                           \
  {                                             \
    int32_t word;                               \
    std::memcpy(&word, a + (r) * 4, 4);         \
    const __m512i av = _mm512_set1_epi32(word); \
    multiplyAdd(acc##r##0, av, wv0);            \
    multiplyAdd(acc##r##1, av, wv1);            \
  }
    GIZML_STEP(0) GIZML_STEP(1) GIZML_STEP(2) GIZML_STEP(3) GIZML_STEP(4) GIZML_STEP(5)
    GIZML_STEP(6) GIZML_STEP(7) GIZML_STEP(8) GIZML_STEP(9) GIZML_STEP(10) GIZML_STEP(11)
  }
  const int64_t j0 = panel * kPanel, j1 = j0 + kPanel;
  auto keep = [&](int64_t j) {
    return static_cast<__mmask16>(n - j >= kPanel ? 0xFFFF : n <= j ? 0 : (1u << (n - j)) - 1);
  };
  const __mmask16 keep0 = keep(j0), keep1 = keep(j1);
  // The first piece of k takes the weight sums off; the others add to what the first stored.
  const bool first = q0 == 0;
  const __m512i sums0 = _mm512_loadu_si512(x.weightSums.data() + j0);
  const __m512i sums1 = _mm512_loadu_si512(x.weightSums.data() + j1);
  auto store = [&](int64_t r, int64_t j, __mmask16 keep, __m512i sums, __m512i acc) {
    int32_t* out = c + (i + r) * ldc + j;
    _mm512_mask_storeu_epi32(
        out, keep, first ? _mm512_sub_epi32(acc, sums) : _mm512_add_epi32(acc, _mm512_maskz_loadu_epi32(keep, out)));
  };
#define GIZML_STORE(r)                     \
  if ((r) < rows) {                        \
    store(r, j0, keep0, sums0, acc##r##0); \
    store(r, j1, keep1, sums1, acc##r##1); \
  }
  GIZML_STORE(0) GIZML_STORE(1) GIZML_STORE(2) GIZML_STORE(3) GIZML_STORE(4) GIZML_STORE(5)
  GIZML_STORE(6) GIZML_STORE(7) GIZML_STORE(8) GIZML_STORE(9) GIZML_STORE(10) GIZML_STORE(11)
#undef GIZML_ACC
#undef GIZML_STEP
#undef GIZML_STORE
}

}  // namespace

void gemmAvx512Vnni(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* w, int64_t ldw,
                    int32_t* c, int64_t ldc) {
  Packed x;
  x.k4 = (k + 3) / 4;
  // Panels in pairs, as the tiles read them.
  const int64_t width = x.k4 * 4, panels = (n + 2 * kPanel - 1) / (2 * kPanel) * 2;
  const int64_t rowGroups = (m + kMaxRows - 1) / kMaxRows;
  x.rows.assign(static_cast<size_t>(rowGroups * kMaxRows * width), 0);
  x.panels.assign(static_cast<size_t>(panels * x.k4 * 64), 0);
  x.weightSums.assign(static_cast<size_t>(panels * kPanel), 0);
  // Word by word: four bytes of k at a time (the last word's bytes past k stay zero).
  auto word = [k](const int8_t* row, int64_t q) {
    uint32_t v = 0;
    std::memcpy(&v, row + q * 4, static_cast<size_t>(std::min<int64_t>(4, k - q * 4)));
    return v;
  };
  core::parallelFor(m, 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      uint8_t* out = x.rows.data() + (i / kMaxRows * x.k4 * kMaxRows + i % kMaxRows) * 4;
      const uint32_t past = k % 4 == 0 ? 0 : 0x80808080u << (8 * (k % 4));  // bytes past k back to 0
      for (int64_t q = 0; q < x.k4; ++q) {
        const uint32_t v = (word(a + i * lda, q) ^ 0x80808080u) ^ (q == x.k4 - 1 ? past : 0);
        std::memcpy(out + q * kMaxRows * 4, &v, 4);
      }
    }
  });
  // A panel's words gathered 16 rows at a time (one full 64-byte store each), its rows' sums taken
  // from the same vectors (vpdpbusd of ones: each lane's four bytes); the last word, if k leaves
  // one partial, by hand (a gather would read past the rows).
  const __m512i offsets = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                             _mm512_set1_epi32(static_cast<int32_t>(ldw)));
  core::parallelFor(panels, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < std::min(p1, (n + kPanel - 1) / kPanel); ++p) {
      const int64_t live = std::min<int64_t>(kPanel, n - p * kPanel);
      const __mmask16 lanes = static_cast<__mmask16>(live == kPanel ? 0xFFFF : (1u << live) - 1);
      const int8_t* rows = w + p * kPanel * ldw;
      uint8_t* out = x.panels.data() + p * x.k4 * 64;
      __m512i sums = _mm512_setzero_si512();
      for (int64_t q = 0; q < k / 4; ++q) {
        const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), lanes, offsets, rows + q * 4, 1);
        _mm512_storeu_si512(out + q * 64, v);
        sums = _mm512_dpbusd_epi32(sums, _mm512_set1_epi8(1), v);
      }
      if (k % 4 != 0) {
        uint32_t last[kPanel] = {};
        for (int64_t r = 0; r < live; ++r) last[r] = word(rows + r * ldw, k / 4);
        const __m512i v = _mm512_loadu_si512(last);
        _mm512_storeu_si512(out + k / 4 * 64, v);
        sums = _mm512_dpbusd_epi32(sums, _mm512_set1_epi8(1), v);
      }
      _mm512_storeu_si512(x.weightSums.data() + p * kPanel, _mm512_slli_epi32(sums, 7));  // times 128
    }
  });
  forEachTile(m, panels, x.k4, kMaxRows, 64, [&](int64_t i, int64_t rows, int64_t p, int64_t q0, int64_t q1) {
    tile(x, i, rows, p, q0, q1, c, ldc, n);
  });
}

}  // namespace gizml::cpu::int8_kernels

#if defined(__clang__)
#pragma clang attribute pop
#endif
