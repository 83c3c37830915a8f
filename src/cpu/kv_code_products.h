#pragma once
// Attention's two products read straight from coded keys and values (cpu/kv_codes.h: x = s c + o
// for a head's vector, one scale s and offset o a token): the scores
//   q.k_t = s_t (q.c_t) + o_t sum(q)
// and a context
//   sum_t p_t v_t = sum_t (p_t s_t) c_t + sum_t p_t o_t,
// with the codes widened to floats in registers, never a dequantized copy of the cache.
//
// Every output is one chain of fmas in increasing order of the summed index from +0, whatever the
// number of rows, positions or the ISA's lanes: a row alone (a decode step) and the same row in a
// block of 32 (a prefill) give the same bits (docs/architecture.md, "Batch invariance"). Masked
// positions (p = 0) add exact zeros.
#include <cstdint>

namespace gizml::cpu {

/// One-byte codes as a matrix, rows `stride` bytes apart.
struct CodeRows {
  const uint8_t* data;
  int64_t stride;
};

/// The widest run of positions the score kernel reads at once: codes rows must be readable up to
/// their count rounded up to this (a page's key rows are kKvPageTokens codes).
inline constexpr int64_t kCodeLanes = 16;

/// out[r][t] = scales[t] (sum over d < depth of q[r][d] codes[d][t]) + offsets[t] sum(q[r]) for
/// r < m, t < count; q's rows are ldq floats apart, out's ldo.
void codeScores(const float* q, int64_t m, int64_t ldq, CodeRows codes, int64_t depth, int64_t count,
                const float* scales, const float* offsets, float* out, int64_t ldo);

/// out[r][d] (+)= sum over t < count of (p[r][t] scales[t]) codes[t][d], plus sum over t of
/// p[r][t] offsets[t], for r < m, d < width: added to out where `accumulate`, else written.
void codeContext(const float* p, int64_t m, int64_t ldp, CodeRows codes, int64_t count, int64_t width,
                 const float* scales, const float* offsets, float* out, int64_t ldo, bool accumulate);

/// n codes of `bits` bits (8, 4 or 2), packed low bits first, from code `first` on, one a byte.
void unpackCodes(const uint8_t* packed, int bits, int64_t first, int64_t n, uint8_t* out);

}  // namespace gizml::cpu
