// Attention's products over keys and values as stored, with Highway (see kv_products.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/kv_products.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include <gizml/dtype.h>

#include "cpu/kv_products.h"

HWY_BEFORE_NAMESPACE();
namespace gizml::cpu::kv_products {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// Rows of q (or of p) a tile keeps in registers with 16 of them (kTileRows: with 32), and vectors
// of outputs a row: 4 x 2 accumulators with their codes fit AVX2's 16 registers.
constexpr int kRows = 4;
constexpr int kVectors = 2;
// A decode step's rows (a KV head's group of query heads: 2 to 4 in the models here) take wider
// tiles: more chains of fmas at once, and fewer passes over a page, each reading longer runs of a
// key or value row. With 2 vectors, a 16k-token F16 cache's scores and context read 11.5 and 7.8
// GB/s on one Zen 5 thread for 2 rows (the machine reads 37), 11 and 6 for 3 or 4 rows; with
// these, 18 and 21 for 2, 14 and 11 for 3, 11 and 9 for 4 (docs/benchmarks.md). R x Nv
// accumulators and Nv loads fit AVX-512's 32 registers (2 x 8, 3 x 6, 4 to 6 x 4) and AVX2's 16
// (2 x 4; 3 or 4 rows, 2 vectors).
constexpr bool kRegisters32 = HWY_TARGET <= HWY_AVX3;
template <int R>
constexpr int kTileVectors = R <= 2 ? (kRegisters32 ? 8 : 4) : (kRegisters32 ? (R == 3 ? 6 : 4) : kVectors);

// Lanes(d) stored values from `at` as floats: codes (exact: integers below 256) or elements.
template <class E>
HWY_INLINE V LoadAsFloats(D d, const E* at) {
  if constexpr (std::is_same_v<E, float>) {
    return hn::LoadU(d, at);
  } else if constexpr (std::is_same_v<E, uint8_t>) {
    const hn::Rebind<int32_t, D> di;
    const hn::Rebind<uint8_t, D> du8;
    return hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(du8, at)));
  } else {
    const hn::Rebind<E, D> de;
    return hn::PromoteTo(d, hn::LoadU(de, at));
  }
}

// One stored value as a float (the same as its lane in LoadAsFloats).
template <class E>
HWY_INLINE float Scalar(E x) {
  if constexpr (std::is_same_v<E, uint8_t> || std::is_same_v<E, float>) return static_cast<float>(x);
  else if constexpr (std::is_same_v<E, hwy::bfloat16_t>) return hwy::F32FromBF16(x);
  else {
    uint16_t bits;
    std::memcpy(&bits, &x, sizeof(bits));
    return halfToFloat(bits);
  }
}

template <class E>
constexpr bool kCoded = std::is_same_v<E, uint8_t>;

// Rows a tile's loop asks for ahead of its loads, at least. A page's key rows are 256 positions
// apart and a tile reads a few cache lines of each: strides the hardware's prefetchers follow
// late. The first tile over a row asks for all of it, so that the tiles after it (narrower ones:
// more rows) find it near; only the first group of rows asks (a prefill's blocks of 32 rows find
// the page near for the groups after it). On a Zen 5 thread, an ad-hoc loop over 28 layers' F16
// caches of 512 positions: scores and context of 2 rows read 15-18 and 17-22 GB/s with no
// prefetch, 31-33 and 20-21 with these; of 4 rows 11 and 9 -> 23 and 12 (docs/benchmarks.md).
constexpr int64_t kPrefetchRows = 8;
// The context's rows (a head's values, one run of memory) are asked for at least this many
// bytes ahead: 8 of SmolLM2's 128-byte rows were 1 KiB, too near (one thread's decode at depth
// 2,048: 188-197 tok/s, 208-211 with 4 KiB, 197-209 with 8).
constexpr int64_t kContextAheadBytes = 4096;

// Asks for the `bytes` from `at` (whole cache lines) to be brought in; no architectural effect.
HWY_INLINE void PrefetchBytes(const void* at, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(static_cast<const char*>(at) + b);
}

// Calls tile.template operator()<N>(at) over the whole vectors of [0, n): tiles of Nv vectors
// while they fit, then of 4, 2 and 1, so that a row narrower than Nv vectors still takes wide
// tiles (SmolLM2's 64 dimensions against AVX-512's 3-row tile of 6 x 16 lanes ran as four 1-vector
// passes). A lane's sum does not depend on its tile. Returns where the whole vectors end.
template <int Nv, class Tile>
HWY_INLINE int64_t ForEachTile(int64_t lanes, int64_t n, const Tile& tile) {
  int64_t at = 0;
  for (; at + Nv * lanes <= n; at += Nv * lanes) tile.template operator()<Nv>(at);
  if constexpr (Nv > 4)
    if (at + 4 * lanes <= n) tile.template operator()<4>(at), at += 4 * lanes;
  if constexpr (Nv > 2)
    if (at + 2 * lanes <= n) tile.template operator()<2>(at), at += 2 * lanes;
  for (; at + lanes <= n; at += lanes) tile.template operator()<1>(at);
  return at;
}

// Stores v's first `valid` lanes (all where valid >= lanes).
HWY_INLINE void StoreFirst(D d, V v, float* to, int64_t valid) {
  if (valid >= static_cast<int64_t>(hn::Lanes(d))) hn::StoreU(v, d, to);
  else hn::BlendedStore(v, hn::FirstN(d, static_cast<size_t>(valid)), d, to);
}

// Scores of R rows for Nv vectors of positions from t.
template <class E, int R, int Nv>
HWY_INLINE void ScoreTile(D d, const float* q, int64_t ldq, const float* sums, const E* x, int64_t stride, int64_t depth,
                          int64_t t, int64_t count, const float* scales, const float* offsets, float* out,
                          int64_t ldo, int64_t aheadBytes) {
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  V acc[R][Nv];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < Nv; ++j) acc[r][j] = hn::Zero(d);
  for (int64_t k = 0; k < depth; ++k) {
    const E* row = x + k * stride + t;
    PrefetchBytes(row + kPrefetchRows * stride, aheadBytes);
    V c[Nv];
    for (int j = 0; j < Nv; ++j) c[j] = LoadAsFloats(d, row + j * lanes);
    for (int r = 0; r < R; ++r) {
      const V qk = hn::Set(d, q[r * ldq + k]);
      for (int j = 0; j < Nv; ++j) acc[r][j] = hn::MulAdd(qk, c[j], acc[r][j]);
    }
  }
  for (int j = 0; j < Nv; ++j) {
    const int64_t at = t + j * lanes;
    if constexpr (kCoded<E>) {
      const V s = hn::LoadU(d, scales + at), o = hn::LoadU(d, offsets + at);
      for (int r = 0; r < R; ++r)
        StoreFirst(d, hn::MulAdd(s, acc[r][j], hn::Mul(o, hn::Set(d, sums[r]))), out + r * ldo + at, count - at);
    } else {
      for (int r = 0; r < R; ++r) StoreFirst(d, acc[r][j], out + r * ldo + at, count - at);
    }
  }
}

template <class E, int R>
void ScoreRows(D d, const float* q, int64_t ldq, const E* x, int64_t stride, int64_t depth, int64_t count,
               const float* scales, const float* offsets, float* out, int64_t ldo, bool prefetch) {
  float sums[R] = {};  // each row's sum, for the codes' offsets: R chains side by side
  if constexpr (kCoded<E>)
    for (int64_t k = 0; k < depth; ++k)
      for (int r = 0; r < R; ++r) sums[r] += q[r * ldq + k];
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto rowBytes = [&](int64_t t) { return prefetch && t == 0 ? count * static_cast<int64_t>(sizeof(E)) : 0; };
  const auto tile = [&]<int Nv>(int64_t t) {
    ScoreTile<E, R, Nv>(d, q, ldq, sums, x, stride, depth, t, count, scales, offsets, out, ldo, rowBytes(t));
  };
  const int64_t t = ForEachTile<kTileVectors<R>>(lanes, count, tile);
  if (t < count) tile.template operator()<1>(t);  // the last positions: a whole vector read, its first lanes stored
}

// Rows a prefill's tile keeps: with 32 registers 6, whose 6 x 4 accumulators each loaded (and
// widened) vector of keys or values serves, 24 fmas where 4 rows gave 16. A throwaway loop timing
// `cachedAttention` alone over one causal 4,096-row run (one thread, AVX-512): SmolLM2's heads
// (64 dimensions) with 8-bit codes 46.1-46.7 -> 47.8-49.6 G multiply-adds a second, with F16 the
// same; the Qwen3-0.6B-shaped heads (128) 50-52 -> 55-58 (codes), 52 -> 54-56 (F16); Gemma 3's
// (256) 51-55 -> 57-62 (codes), 54-55 -> 60-62 (F16).
constexpr int kTileRows = kRegisters32 ? 6 : kRows;
static_assert(kTileRows * kTileVectors<kTileRows> + kTileVectors<kTileRows> + 1 <= (kRegisters32 ? 32 : 16),
              "a tile's accumulators, its loaded vectors and a broadcast weight fit the registers");

// Calls rows.template operator()<R>(r) over m rows by blocks of kTileRows, then the rest.
template <class RowBlock>
HWY_INLINE void ForEachRowBlock(int64_t m, const RowBlock& rows) {
  constexpr int kR = kTileRows;
  int64_t r = 0;
  for (; r + kR <= m; r += kR) rows.template operator()<kR>(r);
  const int64_t rest = m - r;
  if constexpr (kR > 5)
    if (rest == 5) rows.template operator()<5>(r);
  if constexpr (kR > 4)
    if (rest == 4) rows.template operator()<4>(r);
  if (rest == 3) rows.template operator()<3>(r);
  if (rest == 2) rows.template operator()<2>(r);
  if (rest == 1) rows.template operator()<1>(r);
}

template <class E>
void Scores(const float* q, int64_t m, int64_t ldq, const E* x, int64_t stride, int64_t depth, int64_t count,
            const float* scales, const float* offsets, float* out, int64_t ldo) {
  const D d;
  ForEachRowBlock(m, [&]<int R>(int64_t r) {
    ScoreRows<E, R>(d, q + r * ldq, ldq, x, stride, depth, count, scales, offsets, out + r * ldo, ldo, r == 0);
  });
}

void KvScores(const float* q, int64_t m, int64_t ldq, KvRows x, int64_t depth, int64_t count, const float* scales,
              const float* offsets, float* out, int64_t ldo) {
  if (x.kind == KvElements::Codes)
    Scores(q, m, ldq, static_cast<const uint8_t*>(x.data), x.stride, depth, count, scales, offsets, out, ldo);
  else if (x.kind == KvElements::F32)
    Scores(q, m, ldq, static_cast<const float*>(x.data), x.stride, depth, count, scales, offsets, out, ldo);
  else if (x.kind == KvElements::F16)
    Scores(q, m, ldq, static_cast<const hwy::float16_t*>(x.data), x.stride, depth, count, scales, offsets, out, ldo);
  else
    Scores(q, m, ldq, static_cast<const hwy::bfloat16_t*>(x.data), x.stride, depth, count, scales, offsets, out, ldo);
}

// Each row's sum over positions [t0, t1) of p o (a coded cache's offsets), in kKvOffsetChains
// interleaved chains (kv_products.h). Positions outside [t0, t1) have p = 0 for every row and add
// exact zeros: the blocks start at the one that holds t0, and the last block is padded with zeros,
// so that every position takes the same vector operation (a lone row's range may end elsewhere
// than its block's, and a scalar fma is not the vector MulAdd on targets without an fma).
template <int R>
void OffsetSums(D d, const float* p, int64_t ldp, const float* offsets, int64_t t0, int64_t t1, float (&bias)[R]) {
  constexpr int64_t kChains = kKvOffsetChains;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  static_assert(kChains % HWY_LANES(float) == 0, "a block of chains must be whole vectors");
  V acc[R][kChains];
  for (int r = 0; r < R; ++r)
    for (int64_t k = 0; k < kChains / lanes; ++k) acc[r][k] = hn::Zero(d);
  const auto block = [&](const float* pb, int64_t ldb, const float* ob) {
    for (int64_t k = 0; k < kChains / lanes; ++k) {
      const V o = hn::LoadU(d, ob + k * lanes);
      for (int r = 0; r < R; ++r) acc[r][k] = hn::MulAdd(hn::LoadU(d, pb + r * ldb + k * lanes), o, acc[r][k]);
    }
  };
  // The block of kChains positions from t with only [from, to) of it (zeros elsewhere: not 0
  // times an offset that may be inf or NaN, at a position outside the rows' range).
  const auto partBlock = [&](int64_t t, int64_t from, int64_t to) {
    float pads[R][kChains] = {}, padOffsets[kChains] = {};
    for (int64_t i = from; i < to; ++i) {
      padOffsets[i - t] = offsets[i];
      for (int r = 0; r < R; ++r) pads[r][i - t] = p[r * ldp + i];
    }
    block(pads[0], kChains, padOffsets);
  };
  int64_t t = t0 - t0 % kChains;
  if (t < t0) {
    partBlock(t, t0, std::min(t + kChains, t1));
    t += kChains;
  }
  for (; t + kChains <= t1; t += kChains) block(p + t, ldp, offsets + t);
  if (t < t1) partBlock(t, t, t1);
  for (int r = 0; r < R; ++r) {
    float chain[kChains];
    for (int64_t k = 0; k < kChains / lanes; ++k) hn::StoreU(acc[r][k], d, chain + k * lanes);
    for (int64_t half = kChains / 2; half > 0; half /= 2)
      for (int64_t i = 0; i < half; ++i) chain[i] += chain[i + half];
    bias[r] = chain[0];
  }
}

// The context of R rows for Nv vectors of dimensions from d0, over positions [t0, t1) (each row's
// weight w[r][t], ldw apart: p, or p times the codes' scales), plus each row's `bias` (the sum of
// p o for codes, zeros for elements).
template <class E, int R, int Nv>
HWY_INLINE void ContextTile(D d, const float* w, int64_t ldw, const E* x, int64_t stride, int64_t t0, int64_t t1,
                            const float (&bias)[R], int64_t d0, float* out, int64_t ldo, bool accumulate, int64_t ahead,
                            int64_t restBytes) {
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  V acc[R][Nv];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < Nv; ++j) acc[r][j] = hn::Zero(d);
  for (int64_t t = t0; t < t1; ++t) {
    const E* row = x + t * stride + d0;
    // The tile's own bytes (a constant count: its loop unrolled), then the rest of the row.
    if (ahead > 0) {
      PrefetchBytes(row + ahead, Nv * lanes * static_cast<int64_t>(sizeof(E)));
      if (restBytes > 0) PrefetchBytes(row + ahead + Nv * lanes, restBytes);
    }
    V c[Nv];
    for (int j = 0; j < Nv; ++j) c[j] = LoadAsFloats(d, row + j * lanes);
    for (int r = 0; r < R; ++r) {
      const V wr = hn::Set(d, w[r * ldw + t]);  // broadcast from memory: a load, not a shuffle
      for (int j = 0; j < Nv; ++j) acc[r][j] = hn::MulAdd(wr, c[j], acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < Nv; ++j) {
      float* to = out + r * ldo + d0 + j * lanes;
      const V part = hn::Add(acc[r][j], hn::Set(d, bias[r]));
      hn::StoreU(accumulate ? hn::Add(hn::LoadU(d, to), part) : part, d, to);
    }
}

template <class E, int R>
void ContextRows(D d, const float* p, int64_t ldp, const E* x, int64_t stride, int64_t count, int64_t width,
                 const float* scales, const float* offsets, float* out, int64_t ldo, bool accumulate, bool prefetch) {
  // The rows' weights, made once for every tile: p itself for elements, p times the scales for codes.
  const float* w = p;
  int64_t ldw = ldp;
  if constexpr (kCoded<E>) {
    thread_local std::vector<float> weights;
    weights.resize(static_cast<size_t>(R * count));
    const auto lanes = static_cast<int64_t>(hn::Lanes(d));
    for (int r = 0; r < R; ++r) {
      const float* pr = p + r * ldp;
      float* to = weights.data() + r * count;
      int64_t t = 0;
      for (; t + lanes <= count; t += lanes) hn::StoreU(hn::Mul(hn::LoadU(d, pr + t), hn::LoadU(d, scales + t)), d, to + t);
      for (; t < count; ++t) to[t] = pr[t] * scales[t];
    }
    w = weights.data(), ldw = count;
  }
  // Positions no row weighs (masked for all, p = 0) at either end are left out: they would add
  // exact zeros, to the context and to the codes' offsets' sums. (Within the range a row's masked
  // positions add exact zeros too.) p, not w: a coded head of one value has scale 0, so w = 0,
  // but its offset counts.
  const auto weighed = [&](int64_t t) {
    for (int r = 0; r < R; ++r)
      if (p[r * ldp + t] != 0.0f) return true;
    return false;
  };
  int64_t t0 = 0, t1 = count;
  while (t0 < t1 && !weighed(t0)) ++t0;
  while (t1 > t0 && !weighed(t1 - 1)) --t1;
  float bias[R] = {};
  if constexpr (kCoded<E>) OffsetSums<R>(d, p, ldp, offsets, t0, t1, bias);
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  // Elements from a row to the one its tile asks for (none: no prefetch).
  const int64_t rowBytes = stride * static_cast<int64_t>(sizeof(E));
  const int64_t ahead = prefetch ? std::max(kPrefetchRows, kContextAheadBytes / rowBytes) * stride : 0;
  // Bytes of the row past a first tile of n vectors.
  const auto restBytes = [&](int64_t d0, int64_t n) {
    return d0 == 0 ? (width - n * lanes) * static_cast<int64_t>(sizeof(E)) : 0;
  };
  int64_t d0 = ForEachTile<kTileVectors<R>>(lanes, width, [&]<int Nv>(int64_t at) {
    ContextTile<E, R, Nv>(d, w, ldw, x, stride, t0, t1, bias, at, out, ldo, accumulate, ahead, restBytes(at, Nv));
  });
  for (; d0 < width; ++d0)  // dimensions past the last whole vector: the same chains, one at a time
    for (int r = 0; r < R; ++r) {
      float sum = 0.0f;
      for (int64_t t = t0; t < t1; ++t) sum = std::fma(w[r * ldw + t], Scalar(x[t * stride + d0]), sum);
      float& to = out[r * ldo + d0];
      to = accumulate ? to + (sum + bias[r]) : sum + bias[r];
    }
}

// Whether a position that some row does not weigh (outside its own first .. last p != 0) while
// another does holds a value that is not finite (an element, or a code's scale or offset): rows
// together would add 0 times it, NaN, to a row that does not read it (a later position of the
// same prompt, or one outside its window). Those positions are few (the diagonal's), checked once.
template <class E>
bool NonFiniteLeftOut(const float* p, int64_t m, int64_t ldp, const E* x, int64_t stride, int64_t count, int64_t width,
                      const float* scales, const float* offsets) {
  int64_t t0 = count, t1 = 0, latestStart = 0, earliestEnd = count;
  for (int64_t r = 0; r < m; ++r) {
    const float* pr = p + r * ldp;
    int64_t a = 0, b = count;
    while (a < b && pr[a] == 0.0f) ++a;
    while (b > a && pr[b - 1] == 0.0f) --b;
    if (a == b) a = count, b = 0;  // weighs nothing: leaves every position out
    else t0 = std::min(t0, a), t1 = std::max(t1, b);
    latestStart = std::max(latestStart, a), earliestEnd = std::min(earliestEnd, b);
  }
  const D d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto finite = [&](int64_t t) {
    if constexpr (kCoded<E>) return std::isfinite(scales[t]) && std::isfinite(offsets[t]);
    const E* row = x + t * stride;
    auto all = hn::IsFinite(hn::Zero(d));
    int64_t i = 0;
    for (; i + lanes <= width; i += lanes) all = hn::And(all, hn::IsFinite(LoadAsFloats(d, row + i)));
    if (!hn::AllTrue(d, all)) return false;
    for (; i < width; ++i)
      if (!std::isfinite(Scalar(row[i]))) return false;
    return true;
  };
  for (int64_t t = t0; t < t1; ++t) {
    if (t >= latestStart && t < earliestEnd) t = earliestEnd;  // every row weighs these
    if (t < t1 && !finite(t)) return true;
  }
  return false;
}

template <class E>
void Context(const float* p, int64_t m, int64_t ldp, const E* x, int64_t stride, int64_t count, int64_t width,
             const float* scales, const float* offsets, float* out, int64_t ldo, bool accumulate) {
  const D d;
  if (m > 1 && NonFiniteLeftOut(p, m, ldp, x, stride, count, width, scales, offsets)) {
    // Each row alone, over its own positions: the bits it gets alone (a row's chain is the same
    // in a block of rows), and nothing of a position it does not read.
    for (int64_t r = 0; r < m; ++r)
      ContextRows<E, 1>(d, p + r * ldp, ldp, x, stride, count, width, scales, offsets, out + r * ldo, ldo, accumulate,
                        r == 0);
    return;
  }
  ForEachRowBlock(m, [&]<int R>(int64_t r) {
    ContextRows<E, R>(d, p + r * ldp, ldp, x, stride, count, width, scales, offsets, out + r * ldo, ldo, accumulate,
                      r == 0);
  });
}

void KvContext(const float* p, int64_t m, int64_t ldp, KvRows x, int64_t count, int64_t width, const float* scales,
               const float* offsets, float* out, int64_t ldo, bool accumulate) {
  if (x.kind == KvElements::Codes)
    Context(p, m, ldp, static_cast<const uint8_t*>(x.data), x.stride, count, width, scales, offsets, out, ldo,
            accumulate);
  else if (x.kind == KvElements::F32)
    Context(p, m, ldp, static_cast<const float*>(x.data), x.stride, count, width, scales, offsets, out, ldo,
            accumulate);
  else if (x.kind == KvElements::F16)
    Context(p, m, ldp, static_cast<const hwy::float16_t*>(x.data), x.stride, count, width, scales, offsets, out, ldo,
            accumulate);
  else
    Context(p, m, ldp, static_cast<const hwy::bfloat16_t*>(x.data), x.stride, count, width, scales, offsets, out,
            ldo, accumulate);
}

}  // namespace HWY_NAMESPACE
}  // namespace gizml::cpu::kv_products
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gizml::cpu {
namespace kv_products {
HWY_EXPORT(KvScores);
HWY_EXPORT(KvContext);

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

void kvScores(const float* q, int64_t m, int64_t ldq, KvRows x, int64_t depth, int64_t count, const float* scales,
              const float* offsets, float* out, int64_t ldo) {
  using namespace kv_products;  // (a static dispatch names the target's namespace, unqualified)
  HWY_DYNAMIC_DISPATCH(KvScores)(q, m, ldq, x, depth, count, scales, offsets, out, ldo);
}

void kvContext(const float* p, int64_t m, int64_t ldp, KvRows x, int64_t count, int64_t width, const float* scales,
               const float* offsets, float* out, int64_t ldo, bool accumulate) {
  using namespace kv_products;
  HWY_DYNAMIC_DISPATCH(KvContext)(p, m, ldp, x, count, width, scales, offsets, out, ldo, accumulate);
}

void unpackCodes(const uint8_t* packed, int bits, int64_t first, int64_t n, uint8_t* out) {
  if (n <= 0) return;  // (out may then be null, which memcpy must not see)
  if (bits == 8) std::memcpy(out, packed + first, static_cast<size_t>(n));
  else if (bits == 4) kv_products::unpack<4>(packed, first, n, out);
  else kv_products::unpack<2>(packed, first, n, out);
}
}  // namespace gizml::cpu
#endif
