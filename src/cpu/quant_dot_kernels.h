#pragma once
// The bodies behind quant_dot.h: the portable kernel (output rows [o0, o1) for every activation
// row) and the AVX2 activation quantizer.
#include "cpu/quant_dot.h"

namespace gizml::cpu::quant_kernels {

void dotScalar(const QuantWeights& w, int64_t o0, int64_t o1, const QuantActs& x, float* y, int64_t ldy);

/// quantizeActs for `blocks` groups of `group` values (a multiple of 8) at x: their int8 codes,
/// scales and scaled code sums; AVX2.
void quantizeGroupsAvx2(const float* x, int64_t blocks, int64_t group, int8_t* codes, float* scale, float* sum);

/// The step of the zero-point codes, (2^bits - 1) / 255 in f32: z' = z * step, as the decoder
/// (group_quant) computes it.
inline float zeroStep(int bits) { return static_cast<float>((1 << bits) - 1) / 255.0f; }

/// What the kernels subtract from every stored code of `bits` bits: 128 at 8 bits (stored as
/// q - 128 in the panels, so maddubs's pairs cannot saturate), else 0. Every kernel sums
/// (q - shift) a, so that their integers, and with them their floats, are the same.
constexpr int codeShift(int bits) { return bits == 8 ? 128 : 0; }

}  // namespace gizml::cpu::quant_kernels
