// Attention's products over coded keys and values with Highway (see kv_code_products.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/kv_code_products.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/kv_code_products.h"

HWY_BEFORE_NAMESPACE();
namespace gizml::cpu::kv_products {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// Rows of q (or of p) a tile keeps in registers, and vectors of outputs a row: 4 x 2 accumulators
// with their codes fit AVX2's 16 registers.
constexpr int kRows = 4;
constexpr int kVectors = 2;

// Lanes(d) one-byte codes from `at`, as floats (exact: integers below 256).
HWY_INLINE V Codes(D d, const uint8_t* at) {
  const hn::Rebind<int32_t, D> di;
  const hn::Rebind<uint8_t, D> du8;
  return hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(du8, at)));
}

// Stores v's first `valid` lanes (all where valid >= lanes).
HWY_INLINE void StoreFirst(D d, V v, float* to, int64_t valid) {
  if (valid >= static_cast<int64_t>(hn::Lanes(d))) hn::StoreU(v, d, to);
  else hn::BlendedStore(v, hn::FirstN(d, static_cast<size_t>(valid)), d, to);
}

// Scores of R rows for Nv vectors of positions from t.
template <int R, int Nv>
HWY_INLINE void ScoreTile(D d, const float* q, int64_t ldq, const float* sums, CodeRows codes, int64_t depth,
                          int64_t t, int64_t count, const float* scales, const float* offsets, float* out,
                          int64_t ldo) {
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  V acc[R][Nv];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < Nv; ++j) acc[r][j] = hn::Zero(d);
  for (int64_t k = 0; k < depth; ++k) {
    const uint8_t* row = codes.data + k * codes.stride + t;
    V c[Nv];
    for (int j = 0; j < Nv; ++j) c[j] = Codes(d, row + j * lanes);
    for (int r = 0; r < R; ++r) {
      const V x = hn::Set(d, q[r * ldq + k]);
      for (int j = 0; j < Nv; ++j) acc[r][j] = hn::MulAdd(x, c[j], acc[r][j]);
    }
  }
  for (int j = 0; j < Nv; ++j) {
    const int64_t at = t + j * lanes;
    const V s = hn::LoadU(d, scales + at), o = hn::LoadU(d, offsets + at);
    for (int r = 0; r < R; ++r)
      StoreFirst(d, hn::MulAdd(s, acc[r][j], hn::Mul(o, hn::Set(d, sums[r]))), out + r * ldo + at, count - at);
  }
}

template <int R>
void ScoreRows(D d, const float* q, int64_t ldq, CodeRows codes, int64_t depth, int64_t count, const float* scales,
               const float* offsets, float* out, int64_t ldo) {
  float sums[R];
  for (int r = 0; r < R; ++r) {
    float sum = 0.0f;
    for (int64_t k = 0; k < depth; ++k) sum += q[r * ldq + k];
    sums[r] = sum;
  }
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t t = 0;
  for (; t + kVectors * lanes <= count; t += kVectors * lanes)
    ScoreTile<R, kVectors>(d, q, ldq, sums, codes, depth, t, count, scales, offsets, out, ldo);
  for (; t < count; t += lanes)  // the last positions: whole vectors read, their first lanes stored
    ScoreTile<R, 1>(d, q, ldq, sums, codes, depth, t, count, scales, offsets, out, ldo);
}

void CodeScores(const float* q, int64_t m, int64_t ldq, CodeRows codes, int64_t depth, int64_t count,
                const float* scales, const float* offsets, float* out, int64_t ldo) {
  const D d;
  int64_t r = 0;
  for (; r + kRows <= m; r += kRows)
    ScoreRows<kRows>(d, q + r * ldq, ldq, codes, depth, count, scales, offsets, out + r * ldo, ldo);
  const int64_t rest = m - r;
  if (rest == 3) ScoreRows<3>(d, q + r * ldq, ldq, codes, depth, count, scales, offsets, out + r * ldo, ldo);
  if (rest == 2) ScoreRows<2>(d, q + r * ldq, ldq, codes, depth, count, scales, offsets, out + r * ldo, ldo);
  if (rest == 1) ScoreRows<1>(d, q + r * ldq, ldq, codes, depth, count, scales, offsets, out + r * ldo, ldo);
}

// The context of R rows for Nv vectors of dimensions from d0; `bias` is each row's sum of p o.
template <int R, int Nv>
HWY_INLINE void ContextTile(D d, const float* p, int64_t ldp, CodeRows codes, int64_t count, const float* scales,
                            const float* bias, int64_t d0, float* out, int64_t ldo, bool accumulate) {
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  V acc[R][Nv];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < Nv; ++j) acc[r][j] = hn::Zero(d);
  for (int64_t t = 0; t < count; ++t) {
    float w[R];
    bool any = false;
    for (int r = 0; r < R; ++r) any |= (w[r] = p[r * ldp + t] * scales[t]) != 0.0f;
    if (!any) continue;  // masked for every row: it would add exact zeros
    const uint8_t* row = codes.data + t * codes.stride + d0;
    V c[Nv];
    for (int j = 0; j < Nv; ++j) c[j] = Codes(d, row + j * lanes);
    for (int r = 0; r < R; ++r) {
      const V x = hn::Set(d, w[r]);
      for (int j = 0; j < Nv; ++j) acc[r][j] = hn::MulAdd(x, c[j], acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < Nv; ++j) {
      float* to = out + r * ldo + d0 + j * lanes;
      const V part = hn::Add(acc[r][j], hn::Set(d, bias[r]));
      hn::StoreU(accumulate ? hn::Add(hn::LoadU(d, to), part) : part, d, to);
    }
}

template <int R>
void ContextRows(D d, const float* p, int64_t ldp, CodeRows codes, int64_t count, int64_t width, const float* scales,
                 const float* offsets, float* out, int64_t ldo, bool accumulate) {
  float bias[R];
  for (int r = 0; r < R; ++r) {
    float sum = 0.0f;
    for (int64_t t = 0; t < count; ++t) sum = std::fma(p[r * ldp + t], offsets[t], sum);
    bias[r] = sum;
  }
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t d0 = 0;
  for (; d0 + kVectors * lanes <= width; d0 += kVectors * lanes)
    ContextTile<R, kVectors>(d, p, ldp, codes, count, scales, bias, d0, out, ldo, accumulate);
  for (; d0 + lanes <= width; d0 += lanes)
    ContextTile<R, 1>(d, p, ldp, codes, count, scales, bias, d0, out, ldo, accumulate);
  for (; d0 < width; ++d0)  // dimensions past the last whole vector: the same chains, one at a time
    for (int r = 0; r < R; ++r) {
      float sum = 0.0f;
      for (int64_t t = 0; t < count; ++t)
        sum = std::fma(p[r * ldp + t] * scales[t], static_cast<float>(codes.data[t * codes.stride + d0]), sum);
      float& to = out[r * ldo + d0];
      to = accumulate ? to + (sum + bias[r]) : sum + bias[r];
    }
}

void CodeContext(const float* p, int64_t m, int64_t ldp, CodeRows codes, int64_t count, int64_t width,
                 const float* scales, const float* offsets, float* out, int64_t ldo, bool accumulate) {
  const D d;
  int64_t r = 0;
  for (; r + kRows <= m; r += kRows)
    ContextRows<kRows>(d, p + r * ldp, ldp, codes, count, width, scales, offsets, out + r * ldo, ldo, accumulate);
  const int64_t rest = m - r;
  const float* pr = p + r * ldp;
  float* to = out + r * ldo;
  if (rest == 3) ContextRows<3>(d, pr, ldp, codes, count, width, scales, offsets, to, ldo, accumulate);
  if (rest == 2) ContextRows<2>(d, pr, ldp, codes, count, width, scales, offsets, to, ldo, accumulate);
  if (rest == 1) ContextRows<1>(d, pr, ldp, codes, count, width, scales, offsets, to, ldo, accumulate);
}

}  // namespace HWY_NAMESPACE
}  // namespace gizml::cpu::kv_products
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gizml::cpu {
namespace kv_products {
HWY_EXPORT(CodeScores);
HWY_EXPORT(CodeContext);

template <int Bits>
void unpack(const uint8_t* packed, int64_t first, int64_t n, uint8_t* out) {
  constexpr int64_t perByte = 8 / Bits;
  constexpr uint8_t mask = (1 << Bits) - 1;
  const auto code = [&](int64_t i) {
    const int64_t bit = i * Bits;
    return static_cast<uint8_t>((packed[bit / 8] >> (bit % 8)) & mask);
  };
  int64_t i = 0;
  for (; i < n && (first + i) % perByte != 0; ++i) out[i] = code(first + i);
  const uint8_t* bytes = packed + (first + i) / perByte;
  const int64_t whole = (n - i) / perByte;
  for (int64_t b = 0; b < whole; ++b)  // whole bytes: a loop the compiler vectorises
    for (int64_t k = 0; k < perByte; ++k) out[i + b * perByte + k] = (bytes[b] >> (k * Bits)) & mask;
  for (i += whole * perByte; i < n; ++i) out[i] = code(first + i);
}
}  // namespace kv_products

void codeScores(const float* q, int64_t m, int64_t ldq, CodeRows codes, int64_t depth, int64_t count,
                const float* scales, const float* offsets, float* out, int64_t ldo) {
  HWY_DYNAMIC_DISPATCH(kv_products::CodeScores)(q, m, ldq, codes, depth, count, scales, offsets, out, ldo);
}

void codeContext(const float* p, int64_t m, int64_t ldp, CodeRows codes, int64_t count, int64_t width,
                 const float* scales, const float* offsets, float* out, int64_t ldo, bool accumulate) {
  HWY_DYNAMIC_DISPATCH(kv_products::CodeContext)(p, m, ldp, codes, count, width, scales, offsets, out, ldo,
                                                 accumulate);
}

void unpackCodes(const uint8_t* packed, int bits, int64_t first, int64_t n, uint8_t* out) {
  if (bits == 8) std::memcpy(out, packed + first, static_cast<size_t>(n));
  else if (bits == 4) kv_products::unpack<4>(packed, first, n, out);
  else kv_products::unpack<2>(packed, first, n, out);
}
}  // namespace gizml::cpu
#endif
