// The GPU kernels of a language model's step (argmaxInto, candidatesInto, splitSumInto,
// normRotateInto, siluMulRotatedInto, rowNormRopeInto) against host computations of their
// definitions, and the device checks of the host-only tensor functions. Skipped without a GPU.
//
// Tolerances: argmax, candidates and split sums are exact (comparisons and in-order adds). The
// norms add squares in a block tree on the GPU and in element order here: 1e-5 relative to the
// row's largest value (a few f32 ulps of the sum); BF16 rows: one BF16 ulp (2^-7 relative).
#include <gizml/netops_rows.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

#include "common/expect_error.h"
#include "common/gpu_checks.h"
#include "tensor/gpu/tensor_ops.h"

using namespace gizml;
namespace N = gizml::netops;
namespace gpu = gizhw::gpu;

namespace {

class NetopsRowsGpu : public gizml::test::GpuTest {
 protected:
  T::Tensor upload(const T::Shape& shape, const std::vector<float>& v) const {
    return T::tensor(shape, std::vector<double>(v.begin(), v.end())).on(*gpu_);
  }
  static uint64_t at(const T::Tensor& t) { return gpuops::address(t); }
};

std::vector<float> randomFloats(size_t n, uint64_t seed, double scale = 1.0) {
  return T::normal(T::Key(seed), {static_cast<int64_t>(n)}, 0.0, scale).toFloats();
}

}  // namespace

TEST_F(NetopsRowsGpu, ArgmaxTakesTheFirstOfEqualsAndNeverNaN) {
  const int64_t vocab = 1000, stride = 1024;
  std::vector<float> logits(4 * stride, 0.0f);
  auto v = randomFloats(4 * stride, 1);
  for (size_t i = 0; i < v.size(); ++i) logits[i] = v[i];
  logits[0 * stride + 10] = logits[0 * stride + 700] = 9.0f;  // a tie: the first wins
  logits[1 * stride + 0] = std::nanf("");
  logits[1 * stride + 999] = 8.0f;
  for (int64_t i = 0; i < vocab; ++i) logits[2 * stride + i] = std::nanf("");  // all NaN: token 0
  logits[3 * stride + 1001] = 100.0f;  // past vocab: not read
  const auto dev = upload({4, stride}, logits);
  auto top = T::zeros({4}).on(*gpu_);
  N::argmaxInto(*gpu_, 4, vocab, stride, false, at(top), at(dev), 0);
  std::vector<double> want(4);
  for (int r = 0; r < 4; ++r) {
    int64_t best = -1;
    for (int64_t i = 0; i < vocab; ++i) {
      const float x = logits[r * stride + i];
      if (!std::isnan(x) && (best < 0 || x > logits[r * stride + best])) best = i;
    }
    want[r] = static_cast<double>(best < 0 ? 0 : best);
  }
  EXPECT_EQ(top.host().toDoubles(), want);
  EXPECT_EQ(want[0], 10.0);
  // Indirect: rows from the row indexes in blocks.
  const auto blocks = upload({2}, {3.0f, 0.0f});
  auto top2 = T::zeros({2}).on(*gpu_);
  N::argmaxInto(*gpu_, 2, vocab, stride, true, at(top2), at(dev), at(blocks));
  EXPECT_EQ(top2.host().toDoubles(), (std::vector<double>{want[3], want[0]}));
}

TEST_F(NetopsRowsGpu, CandidatesAreEachThreadsLargest) {
  const int64_t rows = 2, vocab = 3000;
  auto logits = randomFloats(rows * vocab, 2);
  logits[5] = logits[5 + 256] = 7.0f;  // a tie within thread 5: the earlier token first
  logits[6] = std::nanf("");
  const auto dev = upload({rows, vocab}, logits);
  auto cand = T::zeros({rows, N::CANDIDATE_ROW}).on(*gpu_);
  N::candidatesInto(*gpu_, rows, vocab, vocab, false, at(cand), at(dev), 0);
  std::vector<double> want;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < 256; ++t) {
      std::vector<std::pair<float, int64_t>> kept;  // largest first, stable
      for (int64_t i = t; i < vocab; i += 256) {
        const float x = logits[r * vocab + i];
        if (std::isnan(x)) continue;
        auto pos = kept.begin();
        while (pos != kept.end() && pos->first >= x) ++pos;
        kept.insert(pos, {x, i});
        if (kept.size() > static_cast<size_t>(N::TOP_EACH)) kept.pop_back();
      }
      for (int64_t k = 0; k < N::TOP_EACH; ++k) {
        const bool have = k < static_cast<int64_t>(kept.size());
        want.push_back(have ? kept[k].first : -std::numeric_limits<double>::infinity());
        want.push_back(have ? static_cast<double>(kept[k].second) : -1.0);
      }
    }
  EXPECT_EQ(cand.host().toDoubles(), want);
}

TEST_F(NetopsRowsGpu, SplitSumAddsThePartsInOrder) {
  const int64_t total = 1000, splits = 3;
  const auto parts = randomFloats(total * splits, 3, 100.0), base = randomFloats(total, 4);
  const auto p = upload({splits, total}, parts);
  for (bool add : {false, true}) {
    auto y = upload({total}, base);
    N::splitSumInto(*gpu_, at(y), at(p), total, splits, add);
    std::vector<double> want(total);
    for (int64_t i = 0; i < total; ++i) {
      float s = parts[i];
      for (int64_t k = 1; k < splits; ++k) s += parts[k * total + i];
      want[i] = add ? base[i] + s : s;
    }
    EXPECT_EQ(y.host().toDoubles(), want) << "add " << add;
  }
}

TEST_F(NetopsRowsGpu, NormRotateRowsAtAStrideAndOffset) {
  const int64_t rows = 4, width = 64, stride = 100, offset = 10, half = 32;
  const auto x = randomFloats(rows * stride, 5, 3.0), w = randomFloats(width, 6);
  const auto d = randomFloats(5 * width, 7);
  const std::vector<float> map = {3, 1, 0, 4};
  const auto xd = upload({rows, stride}, x), wd = upload({width}, w), dd = upload({5, width}, d);
  const auto md = upload({rows}, map);
  for (bool rotate : {false, true}) {
    auto y = T::zeros({rows, width}).on(*gpu_);
    N::normRotateInto(*gpu_, rows, width, 1e-6, rotate, stride, offset, at(y), at(xd), at(wd), at(dd), at(md));
    const auto got = y.host().toDoubles();
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x.data() + r * stride + offset;
      double ss = 0;
      for (int64_t i = 0; i < width; ++i) ss += double(row[i]) * row[i];
      const double inv = 1 / std::sqrt(ss / width + 1e-6);
      std::vector<double> v(width);
      for (int64_t i = 0; i < width; ++i) v[i] = row[i] * inv * w[i];
      if (rotate) {
        const float* c = d.data() + static_cast<int64_t>(map[r]) * width;
        std::vector<double> u = v;
        for (int64_t i = 0; i < half; ++i) {
          u[i] = v[i] * c[i] - v[i + half] * c[half + i];
          u[i + half] = v[i + half] * c[i] + v[i] * c[half + i];
        }
        v = u;
      }
      double scale = 0;
      for (double e : v) scale = std::max(scale, std::fabs(e));
      for (int64_t i = 0; i < width; ++i) EXPECT_NEAR(got[r * width + i], v[i], 1e-5 * scale) << r << "," << i;
    }
  }
}

TEST_F(NetopsRowsGpu, SiluMulAndItsRotatedCopy) {
  const int64_t rows = 3, ffn = 256, nUp = 2;
  const auto parts = randomFloats(nUp * rows * 2 * ffn, 8);
  const auto p = upload({nUp, rows, 2 * ffn}, parts);
  auto y = T::zeros({rows, ffn}).on(*gpu_), d = T::zeros({rows, ffn}).on(*gpu_);
  N::siluMulRotatedInto(*gpu_, rows, ffn, nUp, at(y), at(p), at(d));
  const auto gy = y.host().toDoubles(), gd = d.host().toDoubles();
  // The regular Hadamard matrix over 16: the Kronecker power of [[1,1,1,-1],[1,1,-1,1],[1,-1,1,1],[-1,1,1,1]] / 2.
  auto h4 = [](int i, int j) { return (i + j == 3) ? -0.5 : 0.5; };
  auto h256 = [&](int i, int j) {
    double v = 1;
    for (int k = 0; k < 4; ++k, i /= 4, j /= 4) v *= h4(i % 4, j % 4);
    return v;
  };
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> want(ffn);
    double scale = 0;
    for (int64_t i = 0; i < ffn; ++i) {
      const float g = parts[r * 2 * ffn + i] + parts[(rows + r) * 2 * ffn + i];
      const float u = parts[r * 2 * ffn + ffn + i] + parts[(rows + r) * 2 * ffn + ffn + i];
      want[i] = g / (1 + std::exp(-double(g))) * u;
      scale = std::max(scale, std::fabs(want[i]));
    }
    for (int64_t i = 0; i < ffn; ++i) EXPECT_NEAR(gy[r * ffn + i], want[i], 1e-6 * scale) << r << "," << i;
    for (int k = 0; k < ffn; ++k) {
      double rotated = 0;
      for (int i = 0; i < ffn; ++i) rotated += gy[r * ffn + i] * h256(i, k);
      EXPECT_NEAR(gd[r * ffn + k], rotated, 1e-5 * scale) << r << "," << k;
    }
  }
}

TEST_F(NetopsRowsGpu, RowNormRopeBf16InPlace) {
  const int64_t rows = 3, width = 32, head = 8, stride = 40;
  const auto x = randomFloats(rows * stride, 9, 2.0), w = randomFloats(width, 10);
  const auto ang = randomFloats(rows * width / 2, 11, 2.0);
  std::vector<float> c(ang.size()), s(ang.size());
  for (size_t i = 0; i < ang.size(); ++i) {
    c[i] = std::cos(ang[i]);
    s[i] = std::sin(ang[i]);
  }
  const auto xb = T::tensor({rows, stride}, std::vector<double>(x.begin(), x.end())).cast(DType::BF16);
  const auto before = xb.toDoubles();
  auto dev = xb.on(*gpu_);
  const auto wd = upload({width}, w), cd = upload({rows, width / 2}, c), sd = upload({rows, width / 2}, s);
  N::rowNormRopeInto(*gpu_, at(dev), stride, rows, width, head, wd, 1e-6, {cd}, {sd});
  const auto got = dev.host().toDoubles();
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < width; ++i) ss += before[r * stride + i] * before[r * stride + i];
    const double inv = 1 / std::sqrt(ss / width + 1e-6);
    for (int64_t p = 0; p < width / 2; ++p) {
      const int64_t i = p / (head / 2) * head + p % (head / 2), j = i + head / 2;
      const double a = before[r * stride + i] * inv * w[i], b = before[r * stride + j] * inv * w[j];
      const double ca = c[r * width / 2 + p], sa = s[r * width / 2 + p];
      const double wi = a * ca - b * sa, wj = b * ca + a * sa;
      EXPECT_NEAR(got[r * stride + i], wi, std::fabs(wi) * 0x1p-7 + 1e-6) << r << "," << i;
      EXPECT_NEAR(got[r * stride + j], wj, std::fabs(wj) * 0x1p-7 + 1e-6) << r << "," << j;
    }
    for (int64_t i = width; i < stride; ++i) EXPECT_EQ(got[r * stride + i], before[r * stride + i]);  // untouched
  }
}

TEST_F(NetopsRowsGpu, HostChecksBeforeLaunching) {
  const auto buf = T::zeros({4096}).on(*gpu_);
  const uint64_t a = at(buf);
  expectError([&] { N::argmaxInto(*gpu_, 0, 10, 10, false, a, a, 0); }, {"argmaxInto", "rows"});
  expectError([&] { N::argmaxInto(*gpu_, 1, 10, 8, false, a, a, 0); }, {"argmaxInto", "stride 8", "vocab 10"});
  expectError([&] { N::candidatesInto(*gpu_, 1, 10, 10, true, a, a, 0); }, {"candidatesInto", "blocks"});
  expectError([&] { N::splitSumInto(*gpu_, a, 0, 10, 2, false); }, {"splitSumInto", "p", "null"});
  expectError([&] { N::splitSumInto(*gpu_, a, a, 10, 0, false); }, {"splitSumInto", "splits"});
  expectError([&] { N::normRotateInto(*gpu_, 2, 7, 1e-6, true, 7, 0, a, a, a, a, 0); },
              {"normRotateInto", "even width"});
  expectError([&] { N::normRotateInto(*gpu_, 2, 8, 1e-6, false, 6, 0, a, a, a, 0, 0); }, {"normRotateInto", "stride 6"});
  expectError([&] { N::siluMulRotatedInto(*gpu_, 2, 100, 1, a, a, a); }, {"siluMulRotatedInto", "ffn 100", "256"});
  expectError([&] { N::rowNormRopeInto(*gpu_, a, 8, 2, 8, 4, T::ones({8}), 1e-6); }, {"rowNormRopeInto", "w", "cpu"});
  expectError([&] { N::rowNormRopeInto(*gpu_, a, 8, 2, 8, 4, T::ones({7}).on(*gpu_), 1e-6); },
              {"rowNormRopeInto", "w", "[7]"});
}
