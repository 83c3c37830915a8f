// The products over stored keys and values (cpu/kv_products.h: codes, F32, F16 and BF16 elements) on
// every SIMD target this CPU runs: against the sums written out in double precision, against the
// promised chains of fmas bit for bit (on the targets with a native fma: AVX2 and up), and a row
// alone against the same row in a block of rows (the same bits). Also the unpacking of codes
// against the packing.
#include "cpu/kv_products.h"

#include <gizml/dtype.h>

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace gizml::cpu;

namespace {

constexpr int64_t kRowCodes = 256;  // a page's key row

struct Inputs {
  std::vector<float> q, scales, offsets;
  std::vector<uint8_t> codes;
  std::vector<uint16_t> halves;  // F16 or BF16 elements in place of the codes
  std::vector<float> floats;     // F32 elements in place of the codes
  std::vector<float> values;     // each stored value (code or element) as a float
  KvElements kind;

  KvRows rows(int64_t first = 0) const {
    if (kind == KvElements::Codes) return {codes.data() + first, kRowCodes, kind};
    if (kind == KvElements::F32) return {floats.data() + first, kRowCodes, kind};
    return {halves.data() + first, kRowCodes, kind};
  }
  bool coded() const { return kind == KvElements::Codes; }
  const float* scale(int64_t t = 0) const { return coded() ? scales.data() + t : nullptr; }
  const float* offset(int64_t t = 0) const { return coded() ? offsets.data() + t : nullptr; }
};

// m rows of `depth` floats and stored values [rows, kRowCodes]: codes below 2^bits with scales and
// offsets per column, or random elements; each padded by kKvLanes (the score kernel reads
// whole vectors; the callers keep zeros there).
Inputs inputs(int64_t m, int64_t depth, int64_t rows, KvElements kind, int bits, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> code(0, (1 << bits) - 1);
  Inputs in;
  in.kind = kind;
  in.q.resize(static_cast<size_t>(m * depth));
  for (float& x : in.q) x = normal(rng);
  const auto stored = static_cast<size_t>(rows * kRowCodes + kKvLanes);
  for (size_t i = 0; i < stored; ++i) {
    if (kind == KvElements::Codes) {
      in.codes.push_back(static_cast<uint8_t>(code(rng)));
      in.values.push_back(static_cast<float>(in.codes.back()));
    } else if (kind == KvElements::F32) {
      in.floats.push_back(normal(rng));
      in.values.push_back(in.floats.back());
    } else {
      const float x = normal(rng);
      in.halves.push_back(kind == KvElements::F16 ? gizml::floatToHalf(x) : gizml::floatToBf16(x));
      in.values.push_back(kind == KvElements::F16 ? gizml::halfToFloat(in.halves.back())
                                                  : gizml::bf16ToFloat(in.halves.back()));
    }
  }
  in.scales.assign(kRowCodes + kKvLanes, 0.0f);
  in.offsets.assign(kRowCodes + kKvLanes, 0.0f);
  for (int64_t t = 0; t < kRowCodes; ++t) {
    in.scales[static_cast<size_t>(t)] = 0.01f + std::abs(normal(rng)) * 0.1f;
    in.offsets[static_cast<size_t>(t)] = normal(rng);
  }
  return in;
}

const char* kindName(KvElements kind) {
  return kind == KvElements::Codes ? "codes" : kind == KvElements::F32 ? "f32" : kind == KvElements::F16 ? "f16" : "bf16";
}

bool nativeFma(int64_t target) { return target <= HWY_AVX2; }

class EveryTarget : public testing::Test {
 protected:
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
};

TEST_F(EveryTarget, ScoresAreTheSumsOverStoredValues) {
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (const KvElements kind : {KvElements::Codes, KvElements::F32, KvElements::F16, KvElements::BF16})
      for (const int64_t depth : {8, 64, 72})
        for (const int64_t count : {1, 5, 16, 17, 40, 160, 256}) {
          SCOPED_TRACE(std::string(hwy::TargetName(target)) + ", " + kindName(kind));
          const int64_t m = 11;  // two blocks of four rows and one of three
          const Inputs in = inputs(m, depth, depth, kind, 8, static_cast<unsigned>(depth * 1000 + count));
          std::vector<float> out(static_cast<size_t>(m * count + 1), -1.0f);
          kvScores(in.q.data(), m, depth, in.rows(), depth, count, in.scale(), in.offset(), out.data(), count);
          ASSERT_EQ(out.back(), -1.0f) << "wrote past the last score";
          for (int64_t r = 0; r < m; ++r)
            for (int64_t t = 0; t < count; ++t) {
              const float* q = in.q.data() + r * depth;
              double exact = 0;
              float chain = 0.0f, sum = 0.0f;
              for (int64_t d = 0; d < depth; ++d) {
                const float x = in.values[static_cast<size_t>(d * kRowCodes + t)];
                exact += static_cast<double>(q[d]) * (in.coded() ? static_cast<double>(in.scales[t]) * x + in.offsets[t] : x);
                chain = std::fma(q[d], x, chain);
                sum += q[d];
              }
              const float got = out[static_cast<size_t>(r * count + t)];
              ASSERT_NEAR(got, exact, 1e-4 * (1.0 + std::abs(exact))) << "row " << r << ", position " << t;
              if (nativeFma(target)) {
                const float want = in.coded() ? std::fma(in.scales[t], chain, in.offsets[t] * sum) : chain;
                ASSERT_EQ(got, want) << "row " << r << ", position " << t;
              }
              // The row alone, and its position alone (a decode step over its own keys).
              float alone = 0.0f;
              kvScores(q, 1, depth, in.rows(t), depth, 1, in.scale(t), in.offset(t), &alone, 1);
              ASSERT_EQ(std::memcmp(&alone, &got, sizeof(float)), 0) << "row " << r << ", position " << t;
            }
        }
  }
}

TEST_F(EveryTarget, ContextIsTheWeightedSumOfStoredRows) {
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (const KvElements kind : {KvElements::Codes, KvElements::F32, KvElements::F16, KvElements::BF16})
      for (const int64_t width : {8, 64, 72, 80, 128, 136})
        for (const int64_t count : {1, 3, 37, 256}) {
          SCOPED_TRACE(std::string(hwy::TargetName(target)) + ", " + kindName(kind));
          const int64_t m = 10;
          const Inputs in = inputs(m, count, count, kind, 4, static_cast<unsigned>(width * 1000 + count));
          // Probabilities with zeros (masked keys) and one row masked but for its first key; from 37
          // positions on, the first 2 (20 of 256: past a block of the offsets' chains) and the last 3
          // masked for every row (left out of the tiles).
          std::vector<float> p(in.q.size());
          for (size_t i = 0; i < p.size(); ++i) p[i] = (i % 5 == 2) ? 0.0f : std::abs(in.q[i]) / static_cast<float>(count);
          for (int64_t t = 1; t < count; ++t) p[static_cast<size_t>(5 * count + t)] = 0.0f;
          const int64_t leading = count >= 256 ? 20 : 2;
          if (count >= 37)
            for (int64_t r = 0; r < m; ++r)
              for (int64_t t = 0; t < count; ++t)
                if (t < leading || t >= count - 3) p[static_cast<size_t>(r * count + t)] = 0.0f;
          std::vector<float> out(static_cast<size_t>(m * width), 0.5f), added = out;
          kvContext(p.data(), m, count, in.rows(), count, width, in.scale(), in.offset(), out.data(), width, false);
          kvContext(p.data(), m, count, in.rows(), count, width, in.scale(), in.offset(), added.data(), width, true);
          for (int64_t r = 0; r < m; ++r) {
            // The offsets' sum: position t in chain t % kKvOffsetChains, the chains added by halves.
            float chains[kKvOffsetChains] = {};
            if (in.coded())
              for (int64_t t = 0; t < count; ++t)
                chains[t % kKvOffsetChains] =
                    std::fma(p[static_cast<size_t>(r * count + t)], in.offsets[t], chains[t % kKvOffsetChains]);
            for (int64_t half = kKvOffsetChains / 2; half > 0; half /= 2)
              for (int64_t i = 0; i < half; ++i) chains[i] += chains[i + half];
            const float bias = chains[0];
            for (int64_t d = 0; d < width; ++d) {
              double exact = 0;
              float chain = 0.0f;
              for (int64_t t = 0; t < count; ++t) {
                const float pt = p[static_cast<size_t>(r * count + t)];
                const float x = in.values[static_cast<size_t>(t * kRowCodes + d)];
                exact += static_cast<double>(pt) * (in.coded() ? static_cast<double>(in.scales[t]) * x + in.offsets[t] : x);
                chain = std::fma(in.coded() ? pt * in.scales[t] : pt, x, chain);
              }
              const float got = out[static_cast<size_t>(r * width + d)];
              ASSERT_NEAR(got, exact, 1e-4 * (1.0 + std::abs(exact))) << "row " << r << ", dimension " << d;
              if (nativeFma(target)) {
                ASSERT_EQ(got, chain + bias) << "row " << r << ", dimension " << d;
              }
              ASSERT_EQ(added[static_cast<size_t>(r * width + d)], 0.5f + got);
            }
            // The row alone gives the same bits.
            std::vector<float> alone(static_cast<size_t>(width));
            kvContext(p.data() + r * count, 1, count, in.rows(), count, width, in.scale(), in.offset(), alone.data(),
                      width, false);
            ASSERT_EQ(std::memcmp(alone.data(), out.data() + r * width, alone.size() * sizeof(float)), 0) << "row " << r;
          }
        }
  }
}

TEST(CodeUnpacking, GivesBackEveryPackedCode) {
  std::mt19937 rng(7);
  for (const int bits : {8, 4, 2}) {
    std::vector<uint8_t> codes(101);
    for (uint8_t& c : codes) c = static_cast<uint8_t>(rng() % (1u << bits));
    std::vector<uint8_t> packed((codes.size() * static_cast<size_t>(bits) + 7) / 8);
    for (size_t i = 0; i < codes.size(); ++i) {  // low bits first
      const size_t bit = i * static_cast<size_t>(bits);
      packed[bit / 8] = static_cast<uint8_t>(packed[bit / 8] | (codes[i] << (bit % 8)));
    }
    for (const int64_t first : {0, 1, 3, 5})
      for (const int64_t n : {0, 1, 7, 96}) {
        std::vector<uint8_t> out(static_cast<size_t>(n));
        unpackCodes(packed.data(), bits, first, n, out.data());
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(out[static_cast<size_t>(i)], codes[static_cast<size_t>(first + i)])
              << bits << " bits, first " << first << ", code " << i;
      }
  }
}

}  // namespace
