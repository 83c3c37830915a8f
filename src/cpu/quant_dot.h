#pragma once
// Products of group-quantized weight rows (docs/format.md) with activations quantized to int8 per
// group: the inner sums are integer dot products of the codes, and each group costs one scale
// multiply plus one zero-point correction (the group's activation sum times the weight offset).
//   y[r, o] = sum_g  s_og * d_rg * sum_i q_oi a_ri  -  s_og * z'_og * d_rg * sum_i a_ri
// Kernels: a portable scalar one, AVX2 (maddubs + madd) and AVX-VNNI (dpbusd), picked at run time.
// AMX is not used: cpuid may advertise it where tile instructions fault (as in our sandbox).
#include <cstdint>
#include <vector>

namespace gizml::cpu {

/// A [rows, cols] matrix in our group format: row o is rowBytes bytes at data + o * rowBytes.
struct QuantWeights {
  const uint8_t* data = nullptr;
  int64_t rows = 0, cols = 0, rowBytes = 0;
  int bits = 4;                    // 2..8
  int64_t group = 32;              // a multiple of 8 dividing cols
  const float* scales = nullptr;   // 256 entries: the scale of each exponent code
};

/// Activations [rows, cols] as int8 codes per group of `group` values: x ~ scale * code, with
/// codes in -127..127 (symmetric, so the 8-bit kernels' sign trick never meets -128) and `sum` =
/// scale * (sum of the group's codes), the zero-point correction's factor.
struct QuantActs {
  int64_t rows = 0, cols = 0, group = 0;
  std::vector<int8_t> codes;     // rows * cols
  std::vector<float> scale, sum; // rows * (cols / group)
};

/// Quantizes x [rows, cols] (cols a multiple of group) into out, reusing its storage.
void quantizeActs(const float* x, int64_t rows, int64_t cols, int64_t group, QuantActs& out);

/// The n codes (n a multiple of 8, as every group) of a little-endian bit stream of `bits`-bit
/// codes (code i in bits i*bits ..).
void unpackCodes(const uint8_t* in, int64_t n, int bits, uint8_t* q);

enum class QuantKernel { Scalar, Avx2, AvxVnni };

/// Whether this CPU runs `k` for weights of `group` (the SIMD kernels need multiples of 32).
bool quantKernelSupported(QuantKernel k, int64_t group);
/// The fastest supported kernel for `group`.
QuantKernel bestQuantKernel(int64_t group);

/// y[r * ldy + o] = (W x_r)[o] for output rows o in [o0, o1) and every activation row r, on the
/// calling thread with kernel k (which must be supported).
void quantDot(QuantKernel k, const QuantWeights& w, int64_t o0, int64_t o1, const QuantActs& x, float* y,
              int64_t ldy);

/// y [x.rows, w.rows] = x W^T with the best kernel, in parallel over blocks of output rows; each
/// block's weights are unpacked once for all activation rows.
void quantMatmul(const QuantWeights& w, const QuantActs& x, float* y);

}  // namespace gizml::cpu
