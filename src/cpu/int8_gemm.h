#pragma once
// Exact products of int8 matrices (ConvRot's W8A8 linears: rotated activations times INT8
// weight codes), summed in i32. Two's-complement sums wrap the same way in every order, so the
// kernel of every ISA gives the portable loop's bits for any k.
//
// The weight comes as [n, k] rows (a linear's output channels, as stored). Each kernel works in
// "broadcast form" (as oneDNN's): the weight rows packed into panels (16 rows a 512-bit vector, 8
// a 256-bit one, a word of each), an activation row's word broadcast to multiply a whole panel at
// once, nothing summed across lanes. vpdpbusd multiplies unsigned by signed bytes, so the VNNI
// kernels take the activations as a + 128 (a ^ 0x80) and take 128 times each weight row's sum
// off their outputs; AVX2 widens the bytes to i16 for vpmaddwd (maddubs' i16 pair sums could
// saturate at 128 x 128 x 2). Each call packs its operands (a weight packed once at load is a
// next step: at few rows the packing costs about as much as the product).
#include <algorithm>
#include <cstdint>

#include "core/thread_pool.h"
#include "cpu/cpu_features.h"

namespace gizml::cpu {

/// c [m, n] (rows ldc apart) = a [m, k] (rows lda apart) times wᵀ for w [n, k] (rows ldw apart),
/// each output the exact sum of its k int8 products in i32 (wrapping past 2^31, as torch's
/// _int_mm), in parallel over blocks of outputs. Throws if this CPU cannot run isa.
void int8Gemm(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* w, int64_t ldw, int32_t* c,
              int64_t ldc, Isa isa = bestIsa());

namespace int8_kernels {
/// The whole product on one ISA (each packs the operands its own way).
void gemmAvx2(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* w, int64_t ldw, int32_t* c,
              int64_t ldc);
void gemmAvxVnni(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* w, int64_t ldw,
                 int32_t* c, int64_t ldc);
void gemmAvx512Vnni(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* w, int64_t ldw,
                    int32_t* c, int64_t ldc);

/// Calls tile(i, rows, panel, q0, q1) (rows <= tileRows activation rows from i, panels `panel` and
/// `panel` + 1, words [q0, q1) of k) over the whole product, in parallel: blocks of 16 micro-tiles
/// of rows by as many panels as keep about 256 KB of weights in L2, in pieces of 512 words of k
/// (the micro-tile's activations stay in L1); a thread's run of blocks shares its weight block.
/// k = 0 (no words) still gets one piece, which stores the zeros. A template, so that each ISA's
/// file has its own copy.
template <class Tile>
void forEachTile(int64_t m, int64_t panels, int64_t words, int64_t tileRows, int64_t panelBytesPerWord,
                 const Tile& tile) {
  constexpr int64_t kPieceWords = 512;
  const int64_t blockRows = 16 * tileRows;
  const int64_t pieceBytes = std::clamp<int64_t>(words, 1, kPieceWords) * panelBytesPerWord;
  const int64_t blockPanels = std::clamp<int64_t>(262144 / pieceBytes / 2 * 2, 2, 32);
  const int64_t rowBlocks = (m + blockRows - 1) / blockRows, panelBlocks = (panels + blockPanels - 1) / blockPanels;
  core::parallelFor(rowBlocks * panelBlocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t i0 = b % rowBlocks * blockRows, i1 = std::min(m, i0 + blockRows);
      const int64_t p0 = b / rowBlocks * blockPanels, p1 = std::min(panels, p0 + blockPanels);
      for (int64_t q0 = 0; q0 == 0 || q0 < words; q0 += kPieceWords)
        for (int64_t i = i0; i < i1; i += tileRows)
          for (int64_t p = p0; p < p1; p += 2)
            tile(i, std::min(tileRows, i1 - i), p, q0, std::min(words, q0 + kPieceWords));
    }
  });
}
}  // namespace int8_kernels

}  // namespace gizml::cpu
