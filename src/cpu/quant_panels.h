#pragma once
// Group-quantized weights repacked once, when a layer is made, for the int8 kernels: panels of 8
// output rows whose codes are interleaved 4 at a time, so that one 32-byte register holds four
// codes of each of the 8 rows. A product with four activation codes broadcast to every lane then
// gives 8 output rows' partial sums in the 8 lanes, and each group's scale and zero-point
// correction cost one vector operation for all 8 rows instead of one per row (what the
// row-major kernels of quant_dot.h pay, and what made them slow). llama.cpp repacks Q4_0 the same
// way for its CPU kernels.
//
// Layout of panel p (rows 8p .. 8p + 7; a last panel's missing rows are zeros), group g:
//  - the group's codes as words, each giving one or two 32-byte vectors in which byte 4i + j is
//    a code of row i (the vector's 4 columns, j = 0..3):
//    4 bits: 32 bytes per 8 columns; byte 4i + j holds column 8k + j in its low nibble and
//      column 8k + 4 + j in its high nibble (so the two halves need no shuffle).
//    6 bits: the same 32 bytes of low nibbles, then 16 bytes of the codes' top 2 bits: byte m
//      holds those of vector bytes m and 16 + m of the first half (bits 0-1, 2-3) and of the
//      second (bits 4-5, 6-7).
//    2, 3, 5, 7 bits: 32 bytes per 4 columns, one code a byte; 8 bits the same with each code
//      stored minus 128 as a signed byte (maddubs multiplies |q - 128| by the activation carrying
//      q - 128's sign: a code up to 255 times 127 would saturate its int16 pairs).
//  - 16 bytes: the 8 rows' scale exponents e, then their zero-point bytes z (as stored, so a
//    panel takes the stored size at 4 and 6 bits; the scales come from the 256-entry table).
// CPUs without AVX2 keep the row-major kernels of quant_dot.h.
#include <cstdint>
#include <vector>

#include "cpu/quant_dot.h"

namespace gizml::cpu {

class QuantMatrix {
 public:
  QuantMatrix() = default;
  /// Packs `w` into panels when this CPU and the format allow, else keeps a copy of its scale
  /// table and reads w's bytes (which must then outlive this object) with quantDot's kernels.
  explicit QuantMatrix(const QuantWeights& w);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t group() const { return group_; }
  int bits() const { return bits_; }
  /// Whether the weights were repacked (then the source bytes are no longer read).
  bool packed() const { return !codes_.empty(); }
  /// Whether panels serve these weights on this CPU.
  static bool panelsSupported(int bits, int64_t group);

  /// y [x.rows, rows] = x W^T, in parallel over panels (or blocks of rows).
  void matmul(const QuantActs& x, float* y) const;
  /// Throws unless x has this matrix's columns and group.
  void checkFits(const QuantActs& x) const;

  // The packed arrays, for the kernels.
  int64_t panels() const { return (rows_ + 7) / 8; }
  int64_t panelCodeBytes() const { return bits_ == 4 || bits_ == 6 ? cols_ * bits_ : cols_ * 8; }
  const uint8_t* panelCodes(int64_t p) const { return codes_.data() + p * panelCodeBytes(); }
  /// Per group, the 8 rows' exponents then zero points.
  const uint8_t* panelExponents(int64_t p) const { return exponents_.data() + p * (cols_ / group_) * 16; }
  const float* scaleTable() const { return scaleTable_.data(); }

 private:
  void pack(const QuantWeights& w);
  friend void matmulAll(const std::vector<const QuantMatrix*>&, const QuantActs&, const std::vector<float*>&);

  int64_t rows_ = 0, cols_ = 0, group_ = 0;
  int bits_ = 0;
  std::vector<uint8_t> codes_, exponents_;
  std::vector<float> scaleTable_;  // the scale of each exponent code
  QuantWeights source_;            // unpacked: the source, read in place
};

/// y_i = x W_i^T for matrices that read the same activations (a layer's q, k and v projections):
/// one parallel pass over all their panels, so a decode step wakes the threads once.
void matmulAll(const std::vector<const QuantMatrix*>& matrices, const QuantActs& x, const std::vector<float*>& ys);

namespace quant_kernels {
/// y[r * ldy + o] for the output rows of panels [p0, p1) (clipped to the matrix) and every
/// activation row; AVX2.
void panelsAvx2(const QuantMatrix& m, int64_t p0, int64_t p1, const QuantActs& x, float* y, int64_t ldy);
}  // namespace quant_kernels

}  // namespace gizml::cpu
