#pragma once
// Attention's online softmax on the CPU, SIMD (softmax_rows_simd.cpp): a block's weights
// e^(s - m) and the weighted sum of value rows, the bits netops' attention promises on every
// SIMD target (its exp is netops' gz_exp, its sums chains of fmas).
#include <cstdint>

namespace gizml::cpu {

/// w[i] = gz_exp(w[i] - m) for i < n (netops/exp_log.inc's exp, the same bits).
void expShifted(float* w, int64_t n, float m);

/// Chains of the sum in scaledExp.
inline constexpr int64_t kSumChains = 16;
/// The largest of n values and the sum of their exponentials from it.
struct ExpSum {
  float top, sum;
};
/// p[j] = e^(scale p[j] - top) for j < n, in place, top the largest of the scale p[j]; returns top
/// and the sum of the new p[j] in kSumChains chains (chain c adds p[c], p[c + 16], ... in order;
/// then the chains in order). The exp as expShifted's: the same bits on every target, for any n.
ExpSum scaledExp(float* p, int64_t n, float scale);

/// acc[x] = acc[x] c, then acc[x] = fma(w[j], v[j ldv + x], acc[x]) for j = 0 .. n - 1 in order,
/// for x < e: the same bits as those loops written out, a register of columns at a time.
void weightedRows(float* acc, int64_t e, float c, const float* w, int64_t n, const float* v, int64_t ldv);

}  // namespace gizml::cpu
