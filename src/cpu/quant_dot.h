#pragma once
// Products of group-quantized weight rows (docs/format.md) with activations quantized to int8 per
// group: the inner sums are integer dot products of the codes, and each group costs one scale
// multiply plus one zero-point correction (the group's activation sum times the weight offset).
//   y[r, o] = sum_g  s_og * d_rg * sum_i q_oi a_ri  -  s_og * z'_og * d_rg * sum_i a_ri
// Every kernel (this portable one and the panels' AVX2, AVX-VNNI and AVX-512 VNNI ones of
// quant_panels.h) does the same steps, so their outputs are the same bits: with c = q - shift
// (shift 128 at 8 bits, else 0) and the integer n = sum_i c_i a_ri (exact in int32), per group in
// order, starting from y = 0:
//   s = scales[e]          (the panels rebuild it as base * (2^(lo/32) * 2^(hi-8)): the same f32)
//   offset = s * (z * step - shift)         step = (2^bits - 1) / 255 in f32; mul, sub, mul
//   y = fma(float(n), s * d, y);  y = fma(-offset, sum, y)
// (their files are compiled with -ffp-contract=off, so no other multiply-add is fused). AMX is
// not used: cpuid may advertise it where its tile instructions fault.
#include <cstdint>
#include <vector>

namespace gizml::cpu {

/// The scale of exponent code e (0..255) of a tensor whose largest scale is `base`:
/// base * 2^((e - 255) / 32), computed as base * (2^(lo/32) * 2^(hi - 8)) with e + 1 = 32 hi + lo,
/// so that a SIMD kernel can rebuild it from e exactly (a 32-entry table and an exponent).
float exponentScale(float base, int e);
/// 2^(k/32) for k in 0..31: the table of exponentScale.
const float* exponentScaleFractions();

/// A [rows, cols] matrix in our group format: row o is rowBytes bytes at data + o * rowBytes.
struct QuantWeights {
  const uint8_t* data = nullptr;
  int64_t rows = 0, cols = 0, rowBytes = 0;
  int bits = 4;                    // 2..8
  int64_t group = 32;              // a multiple of 8 dividing cols
  const float* scales = nullptr;   // 256 entries: exponentScale(base, e); scales[255] is the base
};

/// Activations [rows, cols] as int8 codes per group of `group` values: x ~ scale * code, with
/// codes in -127..127 (symmetric, so the 8-bit kernels' sign trick never meets -128) and `sum` =
/// scale * (sum of the group's codes), the zero-point correction's factor.
struct QuantActs {
  int64_t rows = 0, cols = 0, group = 0;
  std::vector<int8_t> codes;     // rows * cols
  std::vector<float> scale, sum; // rows * (cols / group)
};

/// An Error naming `who` unless x's columns and groups are those of weights of `cols` columns in
/// groups of `group` (the message is built only then: this runs on every product of every layer).
void checkActsFit(const char* who, const QuantActs& x, int64_t cols, int64_t group);

/// Quantizes x [rows, cols] (cols a multiple of group) into out, reusing its storage.
void quantizeActs(const float* x, int64_t rows, int64_t cols, int64_t group, QuantActs& out);
/// The kernel quantizeActs runs for groups that are multiples of 8 ("avx2" or "portable"; both
/// give the same codes), for `giz info`.
const char* quantizeActsKernel();

/// The n codes (n a multiple of 8, as every group) of a little-endian bit stream of `bits`-bit
/// codes (code i in bits i*bits ..).
void unpackCodes(const uint8_t* in, int64_t n, int bits, uint8_t* q);

/// y[r * ldy + o] = (W x_r)[o] for output rows o in [o0, o1) and every activation row r, on the
/// calling thread: the portable kernel (plain integer sums), the reference of the panel kernels
/// (quant_panels.h) and the path of CPUs without AVX2.
void quantDot(const QuantWeights& w, int64_t o0, int64_t o1, const QuantActs& x, float* y, int64_t ldy);

/// y [x.rows, w.rows] = x W^T with quantDot, in parallel over blocks of output rows.
void quantMatmul(const QuantWeights& w, const QuantActs& x, float* y);

}  // namespace gizml::cpu
