#pragma once
// Attention's two products read straight from keys and values as the cache stores them, widened
// to floats in registers, never into a copy of the cache: F32, F16 or BF16 elements, or codes
// (cpu/kv_codes.h: x = s c + o for a head's vector, one scale s and offset o a token), for which
//   q.k_t = s_t (q.c_t) + o_t sum(q)
//   sum_t p_t v_t = sum_t (p_t s_t) c_t + sum_t p_t o_t.
//
// Every output is one chain of fmas in increasing order of the summed index from +0, whatever the
// number of rows, positions or the ISA's lanes, but for a coded context's sum_t p_t o_t: that one
// runs in kKvOffsetChains chains (position t in chain t % kKvOffsetChains, each a chain of fmas
// from +0 in increasing t), then added by halves (chain i += chain i + 8, then + 4, + 2, + 1), so
// that it costs a few vector fmas where one chain a row cost a scalar fma per position. A row alone
// (a decode step) and the same row in a block of 32 (a prefill) give the same bits
// (docs/architecture.md, "Batch invariance"). Masked positions (p = 0) add exact zeros.
#include <cstdint>

namespace gizml::cpu {

/// What a KvRows holds: one-byte codes (with a scale and offset per position), or elements of
/// 16 or 32 bits.
enum class KvElements { Codes, F16, BF16, F32 };

/// A matrix of keys or values as stored, rows `stride` elements apart.
struct KvRows {
  const void* data;
  int64_t stride;
  KvElements kind;
};

/// The widest run of positions the score kernel reads at once: rows of keys must be readable up
/// to their count rounded up to this (a page's key rows are kKvPageTokens long).
inline constexpr int64_t kKvLanes = 16;
/// The chains of a coded context's offsets' sums (a multiple of every target's float lanes).
inline constexpr int64_t kKvOffsetChains = 16;

/// out[r][t] = sum over d < depth of q[r][d] x[d][t] for r < m, t < count; for codes then times
/// scales[t] plus offsets[t] sum(q[r]) (scales and offsets readable to count rounded up to
/// kKvLanes; null for elements). q's rows are ldq floats apart, out's ldo.
void kvScores(const float* q, int64_t m, int64_t ldq, KvRows x, int64_t depth, int64_t count, const float* scales,
              const float* offsets, float* out, int64_t ldo);

/// out[r][d] (+)= sum over t < count of p[r][t] x[t][d] for r < m, d < width (added to out where
/// `accumulate`, else written); for codes the weights are p[r][t] scales[t], plus the sum over t
/// of p[r][t] offsets[t] (scales and offsets null for elements).
void kvContext(const float* p, int64_t m, int64_t ldp, KvRows x, int64_t count, int64_t width, const float* scales,
               const float* offsets, float* out, int64_t ldo, bool accumulate);

/// n codes of `bits` bits (8, 4 or 2), packed low bits first, from code `first` on, one a byte.
void unpackCodes(const uint8_t* packed, int bits, int64_t first, int64_t n, uint8_t* out);

}  // namespace gizml::cpu
