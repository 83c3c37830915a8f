#pragma once
// The bodies behind quant_dot.h: the portable kernel (output rows [o0, o1) for every activation
// row) and the AVX2 activation quantizer.
#include "cpu/quant_dot.h"

namespace gizml::cpu::quant_kernels {

void dotScalar(const QuantWeights& w, int64_t o0, int64_t o1, const QuantActs& x, float* y, int64_t ldy);

/// quantizeActs for `blocks` groups of `group` values (a multiple of 8) at x: their int8 codes,
/// scales and scaled code sums; AVX2.
void quantizeGroupsAvx2(const float* x, int64_t blocks, int64_t group, int8_t* codes, float* scale, float* sum);

/// The offset z' = z (2^bits - 1) / 255 of zero-point code z, in code units.
inline float zeroOffset(int bits, uint8_t z) { return static_cast<float>(z) * static_cast<float>((1 << bits) - 1) / 255.0f; }

}  // namespace gizml::cpu::quant_kernels
