// cachedAttention (cpu/kv_attention.h) against attention written out in double
// precision: grouped-query heads, a prefix already in the cache (start > 0), a row count that
// leaves a partial block, with and without a sliding window, the cache in pages that are not in
// order. Then its invariance: the rows of one
// run give the bits of the same rows run one at a time, in other splits, beside other runs, for
// every kind of cache, also where a sliding window starts past sgemm's first k block.
#include "cpu/kv_attention.h"

#include "core/thread_pool.h"
#include "cpu/kv_codes.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

using namespace gizml;
using namespace gizml::cpu;

namespace {

constexpr int64_t P = kKvPageTokens;

// Pages for `total` positions, in the pool's last pages in reverse order (the first page is no
// sequence's): a table that is not the identity.
std::vector<int32_t> scrambledPages(int64_t total) {
  std::vector<int32_t> pages;
  const auto count = static_cast<int32_t>((total + P - 1) / P);
  for (int32_t i = 0; i < count; ++i) pages.push_back(count - i);
  return pages;
}

struct Fixture {
  AttentionShape s;
  int64_t start, rows, total, qWidth, kvWidth;
  std::vector<float> q, k, v;
  std::vector<int32_t> pages;
  int64_t poolPages;
  std::vector<uint8_t> keys, values;     // the layer's pages
  std::vector<uint16_t> keyRanges, valueRanges;
  KvLayer cache;

  // Keys and values as `dtype` elements, or codes of `bits` bits; with constantValues, every third
  // position's value heads hold one value each (coded: scale 0, the value their offset).
  Fixture(int64_t window, int64_t start_, int64_t rows_, DType dtype, int bits = 0, int64_t headDim = 8,
          bool constantValues = false)
      : s{.heads = 4, .kvHeads = 2, .headDim = headDim, .scale = 0.35f, .window = window},
        start(start_),
        rows(rows_),
        total(start_ + rows_),
        qWidth(s.heads * s.headDim),
        kvWidth(s.kvHeads * s.headDim),
        pages(scrambledPages(total)),
        poolPages(static_cast<int64_t>(pages.size()) + 1),
        keyRanges(static_cast<size_t>(poolPages * P * s.kvHeads * 2)),
        valueRanges(keyRanges.size()),
        cache{{nullptr, keyRanges.data(), dtype, bits}, {nullptr, valueRanges.data(), dtype, bits}, s.kvHeads,
              s.headDim, pages.data()} {
    keys.resize(static_cast<size_t>(poolPages * kvWidth * kvRowBytes(cache.keys, P)));
    values.resize(static_cast<size_t>(poolPages * P * s.kvHeads * kvRowBytes(cache.values, s.headDim)));
    cache.keys.data = keys.data();
    cache.values.data = values.data();
    std::mt19937 rng(static_cast<unsigned>(window + 1));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    q.resize(static_cast<size_t>(rows * qWidth));
    k.resize(static_cast<size_t>(total * kvWidth));
    v.resize(k.size());
    for (std::vector<float>* x : {&q, &k, &v})
      for (float& e : *x) e = dist(rng);
    if (constantValues)
      for (int64_t j = 0; j < total; j += 3) std::fill_n(v.begin() + j * kvWidth, kvWidth, 0.75f + 0.01f * j);
    storeKeysValues(cache, 0, total, k.data(), v.data(), kvWidth);
  }

  // The context of rows [r0, r0 + n), run together.
  AttentionRun run(int64_t r0, int64_t n, std::vector<float>& context) const {
    return {cache, start + r0, n, q.data() + r0 * qWidth, context.data() + r0 * qWidth};
  }
};

// The keys (or values) as the cache gives them back: 16-bit elements rounded, codes decoded
// (scale c + offset after the rotation, turned back).
std::vector<float> storedValues(const Fixture& f, const std::vector<float>& x, DType dtype, int bits) {
  std::vector<float> out = x;
  const int64_t dim = f.s.headDim;
  std::vector<uint8_t> codes(static_cast<size_t>(dim));
  for (size_t at = 0; at < out.size(); at += static_cast<size_t>(dim)) {
    float* head = out.data() + at;
    if (bits == 0) {
      for (int64_t d = 0; d < dim; ++d)
        if (dtype != DType::F32) head[d] = dtype == DType::F16 ? halfToFloat(floatToHalf(head[d])) : bf16ToFloat(floatToBf16(head[d]));
      continue;
    }
    const bool rotated = rotatesHeads(f.cache.values, dim);
    if (rotated) rotateHead(head, dim);
    const CodeRange range = codeValues(head, dim, bits, codes.data());
    for (int64_t d = 0; d < dim; ++d)
      head[d] = halfToFloat(range.scale) * static_cast<float>(codes[static_cast<size_t>(d)]) + halfToFloat(range.offset);
    if (rotated) rotateHead(head, dim);
  }
  return out;
}

void expectMatchesReference(int64_t window, int64_t start, DType dtype = DType::F32, int bits = 0,
                            int64_t headDim = 8, bool constantValues = false) {
  SCOPED_TRACE(std::string(dtypeName(dtype)) + ", " + std::to_string(bits) + " bits, heads of " +
               std::to_string(headDim));
  const Fixture f(window, start, 45, dtype, bits, headDim, constantValues);
  const std::vector<float> keys = storedValues(f, f.k, dtype, bits), values = storedValues(f, f.v, dtype, bits);
  const AttentionShape& s = f.s;
  std::vector<float> context(f.q.size(), -9.0f);
  cachedAttention({f.run(0, f.rows, context)}, s);
  for (int64_t r = 0; r < f.rows; ++r)
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t position = f.start + r, kv = h / (s.heads / s.kvHeads);
      const int64_t first = window > 0 ? std::max<int64_t>(0, position - window + 1) : 0;
      std::vector<double> w;
      double top = -1e300, sum = 0;
      for (int64_t j = first; j <= position; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < s.headDim; ++d)
          dot += static_cast<double>(f.q[static_cast<size_t>(r * f.qWidth + h * s.headDim + d)]) *
                 keys[static_cast<size_t>(j * f.kvWidth + kv * s.headDim + d)];
        w.push_back(dot * s.scale);
        top = std::max(top, w.back());
      }
      for (double& x : w) sum += (x = std::exp(x - top));
      for (int64_t d = 0; d < s.headDim; ++d) {
        double want = 0;
        for (int64_t j = first; j <= position; ++j)
          want += w[static_cast<size_t>(j - first)] / sum * values[static_cast<size_t>(j * f.kvWidth + kv * s.headDim + d)];
        ASSERT_NEAR(context[static_cast<size_t>(r * f.qWidth + h * s.headDim + d)], want, 1e-5)
            << "row " << r << ", head " << h << ", dim " << d;
      }
    }
}

}  // namespace

// From position 5 (one page), from 240 (rows and keys across two pages) and from 700 (three).
TEST(CachedAttention, CausalMatchesDoubleReference) {
  for (int64_t start : {5, 240, 700}) expectMatchesReference(0, start);
}

TEST(CachedAttention, SlidingWindowMatchesDoubleReference) {
  for (int64_t start : {5, 240, 700}) expectMatchesReference(7, start);
  expectMatchesReference(300, 700);  // a window over two pages
}

// Keys and values in 16 bits or in codes: attention over what the cache gives back (the products
// over stored values widen them in registers; for codes each token's scale and offset applied to
// sums over its codes).
TEST(CachedAttention, StoredKeysAndValuesMatchDoubleReference) {
  for (auto [dtype, bits] : {std::pair{DType::F16, 0}, {DType::BF16, 0}, {DType::F32, 8}, {DType::F32, 4},
                             {DType::F32, 2}})
    for (int64_t window : {0, 7}) expectMatchesReference(window, 240, dtype, bits);
}

// A coded head of one value (scale 0: its weight times the scale is 0) still adds its offset: the
// positions of a block that no row weighs are those whose softmax weight is 0, not those whose
// weight times the scale is (found by the GPU's coded cache, tests/llm/gpu_kv_codes_test.cpp).
// Heads of 6 values: not rotated, so a head of one value stays one.
TEST(CachedAttention, CodedHeadsOfOneValueAddTheirOffsets) {
  for (int bits : {8, 4, 2})
    for (int64_t window : {0, 7}) expectMatchesReference(window, 240, DType::F32, bits, 6, true);
}

// A value that is not finite reaches the rows that read it and no others: rows before it in the
// same call (a prompt's earlier rows, whose block weighs it for a later row) and rows whose window
// starts past it (a coded value's offset in the same block of offset chains) get the bits they
// get alone, not 0 times inf (found beside the GPU's tensor-core attention,
// tests/llm/gpu_attention_mma_test.cpp).
TEST(CachedAttention, ValuesThatAreNotFiniteReachOnlyTheRowsThatReadThem) {
  constexpr int64_t kInfinite = 30;  // a position of the prompt, in KV head 0
  for (auto [dtype, bits] : {std::pair{DType::F32, 0}, {DType::F16, 0}, {DType::BF16, 0}, {DType::F32, 8}})
    for (int64_t window : {0, 7}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + ", " + std::to_string(bits) + " bits, window " + std::to_string(window));
      Fixture f(window, 0, 75, dtype, bits);
      f.v[static_cast<size_t>(kInfinite * f.kvWidth + 1)] = INFINITY;
      storeKeysValues(f.cache, 0, f.total, f.k.data(), f.v.data(), f.kvWidth);
      std::vector<float> once(f.q.size()), single(f.q.size());
      cachedAttention({f.run(0, f.rows, once)}, f.s);
      std::vector<AttentionRun> rows;
      for (int64_t r = 0; r < f.rows; ++r) rows.push_back(f.run(r, 1, single));
      cachedAttention(rows, f.s);
      int64_t notFinite = 0;
      for (int64_t r = 0; r < f.rows; ++r) {
        const bool reads = r >= kInfinite && (window == 0 || r - window + 1 <= kInfinite);
        for (int64_t i = 0; i < f.qWidth; ++i) {
          const float x = once[static_cast<size_t>(r * f.qWidth + i)], y = single[static_cast<size_t>(r * f.qWidth + i)];
          notFinite += !std::isfinite(x);
          if (!reads) {
            ASSERT_TRUE(std::isfinite(x)) << "row " << r << ", value " << i << ": " << x << ", alone " << y;
            ASSERT_EQ(std::memcmp(&x, &y, sizeof(float)), 0) << "row " << r << ", value " << i << ": " << x << ", alone " << y;
          } else {
            ASSERT_EQ(std::isnan(x), std::isnan(y)) << "row " << r << ", value " << i;
          }
        }
      }
      EXPECT_GT(notFinite, 0);  // the rows that read it
    }
}

TEST(CachedAttention, RowsGiveTheSameBitsInAnySplit) {
  // From 300 with a window of 70: the blocks' first keys fall on both sides of position 256; from
  // 600 the rows see three pages (a decode step's row is split by pages over the threads), with a
  // window of 300 two. Elements of each dtype, and codes of 8, 4 and 2 bits. Each split with the
  // pool's threads and on one.
  for (auto [dtype, bits] : {std::pair{DType::F32, 0}, {DType::F16, 0}, {DType::BF16, 0}, {DType::F32, 8},
                             {DType::F32, 4}, {DType::F32, 2}})
    for (auto [start, window] : {std::pair<int64_t, int64_t>{300, 0}, {300, 70}, {600, 0}, {600, 300}}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + ", " + std::to_string(bits) + " bits, from " +
                   std::to_string(start) + ", window " + std::to_string(window));
      const Fixture f(window, start, 75, dtype, bits);
      std::vector<float> once(f.q.size());
      cachedAttention({f.run(0, f.rows, once)}, f.s);
      for (const bool oneThread : {false, true}) {
        std::optional<gizml::core::SingleThreadScope> alone;
        if (oneThread) alone.emplace();
        std::vector<float> single(f.q.size()), parts(f.q.size());
        std::vector<AttentionRun> rows, split;
        for (int64_t r = 0; r < f.rows; ++r) rows.push_back(f.run(r, 1, single));
        const std::vector<int64_t> bounds{0, 3, 20, 41, f.rows};  // parts of 3, 17, 21 and 34 rows, in one call
        for (size_t i = 0; i + 1 < bounds.size(); ++i) split.push_back(f.run(bounds[i], bounds[i + 1] - bounds[i], parts));
        cachedAttention(rows, f.s);
        cachedAttention(split, f.s);
        EXPECT_EQ(std::memcmp(once.data(), single.data(), once.size() * sizeof(float)), 0) << "rows alone, one thread " << oneThread;
        EXPECT_EQ(std::memcmp(once.data(), parts.data(), once.size() * sizeof(float)), 0) << "parts, one thread " << oneThread;
      }
    }
}

TEST(KvLayout, CodedKeysAndValuesReadBackAsTheirCodes) {
  // An odd number of positions, read from position 5 on: codes that share a byte, both ends.
  for (int bits : {8, 4, 2}) {
    const Fixture f(0, 0, 37, DType::F32, bits);
    const int64_t dim = f.s.headDim, k0 = 5, keys = f.total - k0;
    KvScratch keyScratch, valueScratch;
    std::vector<uint8_t> q(static_cast<size_t>(dim));
    for (int64_t h = 0; h < f.s.kvHeads; ++h) {
      const HeadRows keyT = keyBlock(f.cache, h, k0, keys, keyScratch);
      const HeadRows value = valueBlock(f.cache, h, k0, keys, valueScratch);
      for (int64_t p = k0; p < f.total; ++p)
        for (auto [source, read, isKey] : {std::tuple{&f.k, &keyT, true}, std::tuple{&f.v, &value, false}}) {
          // The codes of the head's vector, rotated (headDim 8 is a power of two).
          std::vector<float> x(source->begin() + p * f.kvWidth + h * dim, source->begin() + p * f.kvWidth + (h + 1) * dim);
          ASSERT_TRUE(rotatesHeads(f.cache.keys, dim));
          rotateHead(x.data(), dim);
          const CodeRange range = codeValues(x.data(), dim, bits, q.data());
          ASSERT_EQ(read->scales[p - k0], halfToFloat(range.scale)) << (isKey ? "key" : "value") << " at " << p;
          ASSERT_EQ(read->offsets[p - k0], halfToFloat(range.offset)) << (isKey ? "key" : "value") << " at " << p;
          for (int64_t d = 0; d < dim; ++d) {
            const KvRows& c = read->rows;
            ASSERT_EQ(c.kind, KvElements::Codes);
            const auto* codes = static_cast<const uint8_t*>(c.data);
            const uint8_t got = isKey ? codes[d * c.stride + p - k0] : codes[(p - k0) * c.stride + d];
            ASSERT_EQ(got, q[static_cast<size_t>(d)]) << (isKey ? "key" : "value") << " of head " << h << " at " << p
                                                      << ", dim " << d << ", " << bits << " bits";
          }
        }
    }
  }
}

// The rotation's SIMD kernel on every target this CPU runs gives the scalar butterflies' bits: each
// stage's a + b and a - b, then the multiply by 1 / sqrt(n), at every power of two up to 512.
TEST(KvLayout, TheRotationIsTheScalarButterfliesOnEveryTarget) {
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t n = 1; n <= kMaxCodedHead; n *= 2) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = normal(gen);
      std::vector<float> want = x;
      for (int64_t half = 1; half < n; half *= 2)
        for (int64_t i = 0; i < n; i += 2 * half)
          for (int64_t j = i; j < i + half; ++j) {
            const float a = want[static_cast<size_t>(j)], b = want[static_cast<size_t>(j + half)];
            want[static_cast<size_t>(j)] = a + b;
            want[static_cast<size_t>(j + half)] = a - b;
          }
      const float norm = 1.0f / std::sqrt(static_cast<float>(n));
      for (float& v : want) v *= norm;
      rotateHead(x.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(x[static_cast<size_t>(i)]), std::bit_cast<uint32_t>(want[static_cast<size_t>(i)]))
            << hwy::TargetName(target) << ", n " << n << ", entry " << i;
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(KvLayout, TheRotationIsTheOrthonormalHadamardMatrix) {
  // Against the Sylvester matrix written out: H[i][j] = (-1)^popcount(i & j) / sqrt(n), in double.
  for (int64_t n : {2, 8, 64, 256}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = std::sin(0.7f * static_cast<float>(i)) + (i == 3 ? 9.0f : 0.0f);
    std::vector<float> y = x;
    rotateHead(y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      double want = 0;
      for (int64_t j = 0; j < n; ++j)
        want += (__builtin_popcountll(static_cast<unsigned long long>(i & j)) % 2 ? -1.0 : 1.0) * x[static_cast<size_t>(j)];
      want /= std::sqrt(static_cast<double>(n));
      ASSERT_NEAR(y[static_cast<size_t>(i)], want, 1e-5) << "n " << n << ", entry " << i;
    }
    rotateHead(y.data(), n);  // its own inverse
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[static_cast<size_t>(i)], x[static_cast<size_t>(i)], 1e-5);
  }
}
