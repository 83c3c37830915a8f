// The 256-bit kernels of int8_gemm.h, included by int8_gemm_avx2.cpp (GIZML_INT8_VNNI 0: bytes
// widened to i16, vpmaddwd) and int8_gemm_avxvnni.cpp (1: vpdpbusd on a + 128) under their
// targets. A micro-tile is kRows activation rows by kCols weight rows: 8 accumulators, the 4
// weight vectors and an activation vector fit the 16 registers.
#include <immintrin.h>

#include <cstdint>

#include "cpu/int8_gemm.h"

namespace gizml::cpu::int8_kernels {

namespace {

constexpr int kRows = 2, kCols = 4;
#if GIZML_INT8_VNNI
constexpr int64_t kStep = 32;  // bytes of k a vector takes
inline __m256i loadA(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i loadW(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i multiplyAdd(__m256i acc, __m256i a, __m256i w) { return _mm256_dpbusd_avx_epi32(acc, a, w); }
inline uint32_t product(uint8_t a, int8_t w) { return static_cast<uint32_t>(static_cast<int32_t>(a) * w); }
#else
constexpr int64_t kStep = 16;  // bytes of k a vector of 16 i16 takes
inline __m256i loadA(const uint8_t* p) { return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256i loadW(const int8_t* p) { return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256i multiplyAdd(__m256i acc, __m256i a, __m256i w) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, w)); }
inline uint32_t product(uint8_t a, int8_t w) { return static_cast<uint32_t>(static_cast<int8_t>(a) * w); }
#endif

inline uint32_t lanesSum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return static_cast<uint32_t>(_mm_cvtsi128_si32(s));
}

template <int R, int C>
void tile(const Int8Job& job, int64_t i, int64_t j) {
  __m256i acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_si256();
  const int64_t whole = job.k / kStep * kStep;
  for (int64_t p = 0; p < whole; p += kStep) {
    __m256i w[C];
    for (int c = 0; c < C; ++c) w[c] = loadW(job.w + (j + c) * job.ldw + p);
    for (int r = 0; r < R; ++r) {
      const __m256i a = loadA(job.a + (i + r) * job.lda + p);
      for (int c = 0; c < C; ++c) acc[r][c] = multiplyAdd(acc[r][c], a, w[c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      uint32_t sum = lanesSum(acc[r][c]);
      for (int64_t p = whole; p < job.k; ++p) sum += product(job.a[(i + r) * job.lda + p], job.w[(j + c) * job.ldw + p]);
      if (job.weightSums) sum -= static_cast<uint32_t>(job.weightSums[j + c]);
      job.c[(i + r) * job.ldc + j + c] = static_cast<int32_t>(sum);
    }
}

template <int R>
void rowTiles(const Int8Job& job, int64_t i, int64_t j0, int64_t j1) {
  int64_t j = j0;
  for (; j + kCols <= j1; j += kCols) tile<R, kCols>(job, i, j);
  for (; j < j1; ++j) tile<R, 1>(job, i, j);
}

}  // namespace

void GIZML_INT8_ENTRY(const Int8Job& job, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  int64_t i = i0;
  for (; i + kRows <= i1; i += kRows) rowTiles<kRows>(job, i, j0, j1);
  for (; i < i1; ++i) rowTiles<1>(job, i, j0, j1);
}

}  // namespace gizml::cpu::int8_kernels
