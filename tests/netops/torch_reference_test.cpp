// gizml::netops against torch: the fixtures of tests/reference/make_netops_fixtures.py (torch in
// f64 on our f32 inputs). Tolerances, |ours - torch| <= atol + rtol |torch|, set a few times
// above the largest absolute error measured on these fixtures (in brackets; each test records
// its own as the property <array>_max_abs_error, see --gtest_output=xml):
//   affine               atol 1e-5, rtol 1e-5  (sgemm's f32 fma chain; 1.4e-6)
//   layerNorm y          atol 1e-5, rtol 1e-5  (in-order f32 sums; 4.8e-7)
//   layerNorm mean/rstd  atol 1e-6, rtol 1e-5  (6e-8)
//   layerNormGrad        atol 2e-5, rtol 1e-5  (dx 2.4e-7, dw and db 9.5e-7)
//   crossEntropy rows    atol 1e-5, rtol 1e-5  (1.9e-6 at 1000 classes); the f64 mean rel 1e-5;
//                        grad atol 1e-7, rtol 1e-5 (1.5e-8)
//   attention            atol 1e-5, rtol 1e-5  (online softmax in f32; 4.2e-7)
//   im2col / im2col1d    exact (copies)
//   col2im               atol 1e-6, rtol 1e-6  (at most 9 f32 terms; 4.8e-7)
//   conv1d, convTranspose1d  atol 1e-5, rtol 1e-5  (1.9e-6)
//   pool2d max and its gradient exact in fact (0), checked at 1e-6; mean pooling and its
//                        gradient atol 1e-6, rtol 1e-6 (1.2e-7)
//   groupNorm            atol 1e-5, rtol 1e-5  (f64 statistics, f32 affine; 6e-7)
#include <gizml/netops.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "common/fixture_file.h"
#include "common/test_paths.h"

using namespace gizml;
using fixture::Case;

namespace {

const std::vector<Case>& cases() {
  static const std::vector<Case> all = fixture::loadFixtures(test_paths::testData() + "/netops/torch.bin");
  return all;
}

T::Tensor toTensor(const fixture::Array& a) {
  T::Tensor t = T::empty(a.shape, static_cast<DType>(a.dtype));
  if (!a.data.empty()) std::memcpy(t.rawData(), a.data.data(), a.data.size());
  return t;
}

T::Tensor array(const Case& c, const std::string& name) { return toTensor(c.array(name)); }

std::vector<int64_t> labels(const Case& c) { return array(c, "labels").toInts(); }

// The one F64 value of an array (a type the Tensor has no dtype for).
double f64Value(const Case& c, const std::string& name) {
  const fixture::Array& a = c.array(name);
  double v = 0.0;
  if (a.dtype != fixture::kF64 || a.data.size() != sizeof v) throw std::runtime_error(name + " is not one F64");
  std::memcpy(&v, a.data.data(), sizeof v);
  return v;
}

struct Tolerance {
  double atol, rtol;
};

void expectClose(const T::Tensor& got, const T::Tensor& want, Tolerance tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<double> g = got.toDoubles(), w = want.toDoubles();
  double worst = 0.0;
  size_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double err = std::fabs(g[i] - w[i]);
    worst = std::max(worst, err);
    if (!(err <= tol.atol + tol.rtol * std::fabs(w[i])) && bad++ < 3)
      ADD_FAILURE() << what << "[" << i << "]: " << g[i] << " vs torch " << w[i];
  }
  std::ostringstream text;
  text << std::setprecision(2) << worst;
  ::testing::Test::RecordProperty(what + "_max_abs_error", text.str());
}

const Tolerance kRowOps{1e-5, 1e-5};
const Tolerance kStats{1e-6, 1e-5};
const Tolerance kSmallSums{1e-6, 1e-6};
const Tolerance kExact{0.0, 0.0};

void runCase(const Case& c) {
  const std::string& op = c.op;
  if (op == "affine") {
    expectClose(netops::affine(array(c, "x"), array(c, "w"), array(c, "b")), array(c, "y"), kRowOps, "y");
  } else if (op == "layer_norm") {
    const double eps = static_cast<double>(c.attr("eps_e9")) * 1e-9;
    const T::Tensor x = array(c, "x"), w = array(c, "w");
    const std::vector<T::Tensor> f = netops::layerNorm(x, w, array(c, "b"), eps);
    expectClose(f[0], array(c, "y"), kRowOps, "y");
    expectClose(f[1], array(c, "mean"), kStats, "mean");
    expectClose(f[2], array(c, "rstd"), kStats, "rstd");
    const std::vector<T::Tensor> g = netops::layerNormGrad(array(c, "dy"), x, w, f[1], f[2]);
    expectClose(g[0], array(c, "dx"), {2e-5, 1e-5}, "dx");
    expectClose(g[1], array(c, "dw"), {2e-5, 1e-5}, "dw");
    expectClose(g[2], array(c, "db"), {2e-5, 1e-5}, "db");
  } else if (op == "cross_entropy") {
    const T::Tensor logits = array(c, "logits");
    expectClose(netops::crossEntropyRows(logits, labels(c)), array(c, "rows"), kRowOps, "rows");
    const double loss = f64Value(c, "loss");
    EXPECT_NEAR(netops::crossEntropyLoss(logits, labels(c)), loss, 1e-5 * std::max(1.0, std::fabs(loss)));
    const double rows = static_cast<double>(logits.shape()[0]);
    expectClose(netops::crossEntropyGrad(logits, labels(c), 1.0 / rows), array(c, "grad"), {1e-7, 1e-5}, "grad");
  } else if (op == "attention") {
    const double scale = static_cast<double>(c.attr("scale_e9")) * 1e-9;
    expectClose(netops::attention(array(c, "q"), array(c, "k"), array(c, "v"), scale, c.attr("causal") != 0),
                array(c, "out"), kRowOps, "out");
  } else if (op == "unfold") {
    const T::Tensor x = array(c, "x");
    const int64_t kh = c.attr("kh"), kw = c.attr("kw"), stride = c.attr("stride"), pad = c.attr("pad");
    expectClose(netops::im2col(x, kh, kw, stride, pad), array(c, "cols"), kExact, "cols");
    const T::Shape& s = x.shape();
    expectClose(netops::col2im(array(c, "g"), s[0], s[1], s[2], s[3], kh, kw, stride, pad), array(c, "folded"),
                kSmallSums, "folded");
  } else if (op == "unfold1d") {
    expectClose(netops::im2col1d(array(c, "x"), c.attr("k"), c.attr("stride"), c.attr("pad"), c.attr("dilation")),
                array(c, "cols"), kExact, "cols");
  } else if (op == "conv1d") {
    std::vector<T::Tensor> bias;
    if (c.find("b")) bias.push_back(array(c, "b"));
    expectClose(netops::conv1d(array(c, "x"), array(c, "w"), bias, c.attr("stride"), c.attr("pad"), c.attr("dilation")),
                array(c, "y"), kRowOps, "y");
  } else if (op == "conv_transpose1d") {
    std::vector<T::Tensor> bias;
    if (c.find("b")) bias.push_back(array(c, "b"));
    expectClose(netops::convTranspose1d(array(c, "x"), array(c, "w"), bias, c.attr("stride"), c.attr("pad")),
                array(c, "y"), kRowOps, "y");
  } else if (op == "pool2d") {
    const bool average = c.attr("average") != 0;
    const int64_t size = c.attr("size"), stride = c.attr("stride");
    const T::Tensor x = array(c, "x");
    expectClose(netops::pool2d(x, size, stride, average), array(c, "y"), average ? kSmallSums : kExact, "y");
    expectClose(netops::pool2dGrad(array(c, "dy"), x, size, stride, average), array(c, "dx"), kSmallSums, "dx");
  } else if (op == "group_norm") {
    const double eps = static_cast<double>(c.attr("eps_e9")) * 1e-9;
    expectClose(netops::groupNorm(array(c, "x"), c.attr("groups"), array(c, "w"), array(c, "b"), eps,
                                  c.attr("act") != 0),
                array(c, "y"), kRowOps, "y");
  } else {
    FAIL() << "no recipe for op " << op;
  }
}

class TorchReference : public ::testing::TestWithParam<size_t> {};

TEST_P(TorchReference, Matches) {
  const Case& c = cases()[GetParam()];
  SCOPED_TRACE(c.name);
  runCase(c);
}

std::string caseName(const ::testing::TestParamInfo<size_t>& info) { return cases()[info.param].name; }

INSTANTIATE_TEST_SUITE_P(Netops, TorchReference, ::testing::Range<size_t>(0, cases().size()), caseName);

}  // namespace
