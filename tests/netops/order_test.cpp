// The orders of additions the spec spells out, where they are observable: each function equals,
// bit for bit, a plain scalar transcription of the spec's steps (written here from its text, with
// the exp and log the GPU kernels share), and the rules of argmax, dropout and the pooling windows.
#include <gizml/netops.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "netops/exp_log.h"

using namespace gizml;
using netops::detail::gz_exp;
using netops::detail::gz_log;

namespace {

T::Tensor randomTensor(uint64_t seed, const T::Shape& shape, double spread = 2.0) {
  return T::uniform(T::Key(seed), shape, -spread, spread);
}

void expectSameBits(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]) && bad++ < 3)
      ADD_FAILURE() << what << "[" << i << "]: " << got[i] << " vs " << want[i];
}

// The spec's attention, step by step, for one batch and query: keys in blocks of 16, each score
// an fma chain over p then scaled, c = e^(m - m'), l = l c + weights, a = a c + fma(weight, v).
std::vector<float> specAttentionRow(const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v, int64_t b, int64_t i, int64_t tq, int64_t tk,
                                    int64_t d, int64_t e, float scale, bool causal, double rate, const T::Key& key) {
  const T::Tensor draw = T::uniform(key, {(b + 1) * tq * tk});
  const std::vector<float> words = draw.toFloats();
  const int64_t last = causal ? std::min(tk - 1, i + tk - tq) : tk - 1;
  float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
  std::vector<float> a(static_cast<size_t>(e), 0.0f);
  for (int64_t j0 = 0; j0 <= last; j0 += 16) {
    const int64_t j1 = std::min(j0 + 16, last + 1);
    std::vector<float> s;
    for (int64_t j = j0; j < j1; ++j) {
      float dot = 0.0f;
      for (int64_t p = 0; p < d; ++p) dot = std::fma(q[((b * tq) + i) * d + p], k[(b * tk + j) * d + p], dot);
      s.push_back(dot * scale);
    }
    float mNew = m;
    for (float x : s) mNew = std::max(mNew, x);
    const float c = gz_exp(m - mNew);
    l = l * c;
    for (float& x : s) {
      x = gz_exp(x - mNew);
      l = l + x;
    }
    for (int64_t x = 0; x < e; ++x) {
      float acc = a[static_cast<size_t>(x)] * c;
      for (int64_t j = j0; j < j1; ++j) {
        float w = s[static_cast<size_t>(j - j0)];
        if (rate > 0.0)
          w = words[static_cast<size_t>((b * tq + i) * tk + j)] >= static_cast<float>(rate)
                  ? w * static_cast<float>(1.0 / (1.0 - rate))
                  : 0.0f;
        acc = std::fma(w, v[(b * tk + j) * e + x], acc);
      }
      a[static_cast<size_t>(x)] = acc;
    }
    m = mNew;
  }
  for (float& x : a) x = x / l;
  return a;
}

void checkAttentionOrder(int64_t batch, int64_t tq, int64_t tk, int64_t d, int64_t e, bool causal, double rate) {
  const T::Tensor q = randomTensor(1, {batch, tq, d}), k = randomTensor(2, {batch, tk, d}),
                  v = randomTensor(3, {batch, tk, e});
  const T::Key key(99);
  const float scale = 0.37f;
  const T::Tensor out = netops::attention(q, k, v, scale, causal, rate, key);
  const std::vector<float> qs = q.toFloats(), ks = k.toFloats(), vs = v.toFloats();
  std::vector<float> want;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < tq; ++i) {
      const std::vector<float> row = specAttentionRow(qs, ks, vs, b, i, tq, tk, d, e, scale, causal, rate, key);
      want.insert(want.end(), row.begin(), row.end());
    }
  expectSameBits(out.toFloats(), want, "attention");
}

TEST(NetopsOrder, AttentionIsTheSpecsStepsBitForBit) {
  checkAttentionOrder(2, 5, 40, 12, 7, false, 0.0);
  checkAttentionOrder(2, 6, 35, 8, 9, true, 0.0);   // tq < tk: a KV cache's bottom-right mask
  checkAttentionOrder(1, 33, 33, 4, 4, true, 0.0);  // blocks cut at the causal edge
}

TEST(NetopsOrder, AttentionDropoutIsTheSpecsStepsBitForBit) { checkAttentionOrder(2, 4, 21, 8, 5, true, 0.3); }

TEST(NetopsOrder, AttentionDropoutMatchesTheMaskedSoftmax) {
  // The weights of softmax(q kᵀ scale) where word (b tq + i) tk + j of the draw is >= rate,
  // times 1 / (1 - rate), times v: the unfused form, from tensor operations.
  const int64_t batch = 2, tq = 3, tk = 19, d = 8, e = 4;
  const double rate = 0.25;
  const T::Tensor q = randomTensor(4, {batch, tq, d}), k = randomTensor(5, {batch, tk, d}),
                  v = randomTensor(6, {batch, tk, e});
  const T::Key key(7);
  const T::Tensor weights = q.matmul(k.transpose(1, 2)).mul(T::scalar(0.5)).softmax(-1);
  const T::Tensor keep = T::uniform(key, {batch, tq, tk}).ge(T::scalar(rate)).cast(DType::F32);
  const T::Tensor want = weights.mul(keep).mul(T::scalar(1.0 / (1.0 - rate))).matmul(v);
  const std::vector<float> got = netops::attention(q, k, v, 0.5, false, rate, key).toFloats(), ref = want.toFloats();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-5 + 1e-5 * std::fabs(ref[i])) << i;
}

TEST(NetopsOrder, CausalMaskSeesKeysUpToTheDiagonalOfTheCache) {
  const std::vector<float> m = netops::causalMask(2, 4).toFloats();
  const float inf = std::numeric_limits<float>::infinity();
  // Query 0 sees keys 0..2, query 1 keys 0..3 (j <= i + tk - tq).
  EXPECT_EQ(m, (std::vector<float>{0, 0, 0, -inf, 0, 0, 0, 0}));
}

TEST(NetopsOrder, CrossEntropySumsIn16LanesAndAveragesInF64RowOrder) {
  const int64_t rows = 5, classes = 77;
  const T::Tensor logits = randomTensor(8, {rows, classes}, 6.0);
  const std::vector<int64_t> labels{0, 76, 13, 40, 5};
  const std::vector<float> x = logits.toFloats();
  std::vector<float> want;
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.data() + r * classes;
    const float m = *std::max_element(row, row + classes);
    float lanes[16] = {};
    for (int64_t j = 0; j < classes; ++j) lanes[j % 16] += gz_exp(row[j] - m);
    for (int half = 8; half >= 1; half /= 2)
      for (int l = 0; l < half; ++l) lanes[l] += lanes[l + half];
    want.push_back(m + gz_log(lanes[0]) - row[labels[static_cast<size_t>(r)]]);
    total += want.back();
  }
  expectSameBits(netops::crossEntropyRows(logits, labels).toFloats(), want, "rows");
  EXPECT_EQ(std::bit_cast<uint64_t>(netops::crossEntropyLoss(logits, labels)), std::bit_cast<uint64_t>(total / rows));
}

TEST(NetopsOrder, LayerNormSumsRowsInOrder) {
  const int64_t width = 37;
  const T::Tensor x = randomTensor(9, {3, width}, 5.0), w = randomTensor(10, {width}), b = randomTensor(11, {width});
  const std::vector<float> xs = x.toFloats(), ws = w.toFloats(), bs = b.toFloats();
  std::vector<float> want, means, rstds;
  for (int64_t r = 0; r < 3; ++r) {
    const float* row = xs.data() + r * width;
    float sum = 0.0f;
    for (int64_t j = 0; j < width; ++j) sum += row[j];
    const float mean = sum / width;
    float sq = 0.0f;
    for (int64_t j = 0; j < width; ++j) sq += (row[j] - mean) * (row[j] - mean);
    const float rstd = 1.0f / std::sqrt(sq / width + 1e-5f);
    for (int64_t j = 0; j < width; ++j) want.push_back((row[j] - mean) * rstd * ws[j] + bs[j]);
    means.push_back(mean);
    rstds.push_back(rstd);
  }
  const std::vector<T::Tensor> got = netops::layerNorm(x, w, b, 1e-5);
  expectSameBits(got[0].toFloats(), want, "y");
  expectSameBits(got[1].toFloats(), means, "mean");
  expectSameBits(got[2].toFloats(), rstds, "rstd");
}

TEST(NetopsOrder, MaxPoolTakesTheFirstLargestAndItsGradientGoesThere) {
  // One 2x2 window holding 3 twice: the first (in window order) gets the gradient.
  const T::Tensor x = T::tensor({1, 1, 2, 2}, {1, 3, 3, 2});
  EXPECT_EQ(netops::pool2d(x, 2, 2, false).toFloats(), std::vector<float>{3});
  EXPECT_EQ(netops::pool2dGrad(T::tensor({1, 1, 1, 1}, {5}), x, 2, 2, false).toFloats(),
            (std::vector<float>{0, 5, 0, 0}));
}

TEST(NetopsOrder, MeanPoolAddsTheWindowInOrderThenScales) {
  const T::Tensor x = randomTensor(12, {1, 1, 4, 4}, 100.0);
  const std::vector<float> xs = x.toFloats();
  float sum = 0.0f;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) sum += xs[static_cast<size_t>(i * 4 + j)];
  EXPECT_EQ(std::bit_cast<uint32_t>(netops::pool2d(x, 3, 1, true).toFloats()[0]),
            std::bit_cast<uint32_t>(sum * static_cast<float>(1.0 / 9.0)));
}

TEST(NetopsOrder, ArgmaxTakesTheFirstOfEqualsAndNaNNeverWins) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const T::Tensor x = T::tensor({4, 4}, {1, 3, 3, 2,          //
                                         nan, -1, -2, nan,   //
                                         5, nan, 7, 7,       //
                                         nan, nan, nan, nan});
  EXPECT_EQ(netops::argmax(x), (std::vector<int64_t>{1, 1, 2, 0}));
  EXPECT_EQ(netops::argmax(randomTensor(13, {2, 3, 50})), randomTensor(13, {2, 3, 50}).argmax(-1).reshape({6}).toInts());
}

TEST(NetopsOrder, DropoutKeepsWhereTheKeysDrawIsAtLeastP) {
  const T::Tensor x = randomTensor(14, {7, 130});
  const T::Key key(15);
  const double p = 0.4;
  const std::vector<float> u = T::uniform(key, x.shape()).toFloats(), xs = x.toFloats();
  std::vector<float> want;
  for (size_t i = 0; i < xs.size(); ++i)
    want.push_back(u[i] >= static_cast<float>(p) ? xs[i] * static_cast<float>(1.0 / (1.0 - p)) : 0.0f);
  expectSameBits(netops::dropout(x, key, p).toFloats(), want, "dropout");
  // The same key gives the same mask on any tensor of the shape: the backward pass's.
  const T::Tensor ones = T::ones(x.shape());
  const std::vector<float> again = netops::dropout(ones, key, p).toFloats();
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(again[i] == 0.0f, u[i] < static_cast<float>(p)) << i;
}

TEST(NetopsOrder, Col2imIsTheAdjointOfIm2col) {
  // <im2col(x), g> = <x, col2im(g)> in f64: every patch entry goes back where it came from.
  const T::Tensor x = randomTensor(16, {2, 3, 7, 6});
  const T::Tensor cols = netops::im2col(x, 3, 2, 2, 1);
  const T::Tensor g = randomTensor(17, cols.shape());
  const T::Tensor back = netops::col2im(g, 2, 3, 7, 6, 3, 2, 2, 1);
  double left = 0.0, right = 0.0;
  const std::vector<double> cs = cols.toDoubles(), gs = g.toDoubles(), xs = x.toDoubles(), bs = back.toDoubles();
  for (size_t i = 0; i < cs.size(); ++i) left += cs[i] * gs[i];
  for (size_t i = 0; i < xs.size(); ++i) right += xs[i] * bs[i];
  EXPECT_NEAR(left, right, 1e-4 * std::fabs(left));
}

TEST(NetopsOrder, Im2col1dTakesARangeOfRows) {
  const T::Tensor x = randomTensor(18, {13, 3});
  const T::Tensor all = netops::im2col1d(x, 3, 2, 1, 2);
  const T::Tensor part = netops::im2col1d(x, 3, 2, 1, 2, 2, 3);
  EXPECT_EQ(part.toFloats(), all.slice(0, 2, 5).contiguous().toFloats());
  EXPECT_EQ(netops::im2col1d(x, 3, 2, 1, 2, 4).toFloats(), all.slice(0, 4, all.shape()[0]).contiguous().toFloats());
}

}  // namespace

namespace {

TEST(NetopsOrder, GroupNormGivesItsDtypeOfTheF32Result) {
  const T::Tensor x = randomTensor(19, {4, 3, 5}), w = randomTensor(20, {4}), b = randomTensor(21, {4});
  const T::Tensor f32 = netops::groupNorm(x, 2, w, b, 1e-5, true);
  const T::Tensor bf16 = netops::groupNorm(x, 2, w, b, 1e-5, true, DType::BF16);
  EXPECT_EQ(bf16.dtype(), DType::BF16);
  EXPECT_EQ(bf16.shape(), x.shape());
  EXPECT_EQ(bf16.toFloats(), f32.cast(DType::BF16).toFloats());
}

}  // namespace
