// patchRows, lazyConv and lazyConv3 against the numpy references of
// tests/reference/make_netops_rows_fixtures.py.
//
// Tolerances (measured on the fixtures): patchRows copies values, so it is exact. The
// convolutions (an F32 matmul of the patches) against float64: |error| below 1e-5 relative to
// sum |w x| over each output (c kh kw = 18 and 54 terms; measured worst about 1e-7).
#include <gizml/netops_rows.h>
#include <gtest/gtest.h>

#include <cmath>

#include "common/expect_error.h"
#include "netops/rows_fixture.h"

using namespace gizml;
namespace N = gizml::netops;

TEST(NetopsRowsConv, PatchRowsOfBandsOfOutputRows) {
  const auto all = rows_fixture::ofOp("patchrows");
  ASSERT_EQ(all.size(), 3u);
  for (const auto* c : all) {
    SCOPED_TRACE(c->name);
    const auto x = rows_fixture::tensor(*c, "x");
    const auto p = N::patchRows(x, c->attr("kh"), c->attr("kw"), c->attr("pad"), c->attr("r0"), c->attr("r1"));
    EXPECT_EQ(p.shape(), c->array("out").shape);
    EXPECT_EQ(p.toDoubles(), rows_fixture::values(c->array("out")));
    const auto bf = N::patchRows(x, c->attr("kh"), c->attr("kw"), c->attr("pad"), c->attr("r0"), c->attr("r1"),
                                 DType::BF16);
    EXPECT_EQ(bf.dtype(), DType::BF16);
    EXPECT_EQ(bf.toDoubles(), p.cast(DType::BF16).toDoubles());
  }
}

namespace {

// |got - want| <= 1e-5 sum|w x| per output, with the bound from the same convolution of |w|, |x|.
void expectConvolution(const T::Tensor& got, const std::vector<double>& want, const T::Tensor& bound) {
  const auto g = got.toDoubles(), b = bound.toDoubles();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) ASSERT_LE(std::fabs(g[i] - want[i]), 1e-5 * b[i] + 1e-30) << i;
}

}  // namespace

TEST(NetopsRowsConv, LazyConvIsTheConvolutionAndFusesItsTail) {
  const auto& c = rows_fixture::find("lazyconv_3x3_p1");
  const auto x = rows_fixture::tensor(c, "x"), w = rows_fixture::tensor(c, "w");
  const auto conv = N::lazyConv(w, x, 3, 3, 1, DType::BF16);
  EXPECT_EQ(conv.shape(), (T::Shape{4, 30}));
  const auto got = conv.eval();
  const auto bound = N::lazyConv(w.abs(), x.abs(), 3, 3, 1, DType::F32).eval();
  expectConvolution(got, rows_fixture::values(c.array("out")), bound);
  // Bias and activation chain onto the product: the same as applying them after.
  const auto bias = T::tensor({4, 1}, {0.5, -1, 0.25, 2});
  const auto fused = (conv + T::lazy(bias)).relu().eval();
  EXPECT_EQ(fused.toDoubles(), got.add(bias).relu().toDoubles());
}

TEST(NetopsRowsConv, LazyConv3OverFrames) {
  const auto& c = rows_fixture::find("lazyconv3");
  const auto x = rows_fixture::tensor(c, "x"), w = rows_fixture::tensor(c, "w");
  const auto got = N::lazyConv3(w, x).eval();
  EXPECT_EQ(got.shape(), (T::Shape{3, 3, 20}));
  expectConvolution(got, rows_fixture::values(c.array("out")), N::lazyConv3(w.abs(), x.abs()).eval());
}

TEST(NetopsRowsConv, BadInputNamesTheArgument) {
  const auto x = T::ones({2, 5, 6});
  expectError([&] { N::patchRows(T::ones({5, 6}), 3, 3, 1, 0, 1); }, {"patchRows", "x", "rank 3"});
  expectError([&] { N::patchRows(x, 3, 3, 1, 2, 6); }, {"patchRows", "r1 6", "5 output rows"});
  expectError([&] { N::patchRows(x, 3, 3, 1, 3, 2); }, {"patchRows", "r0 3"});
  expectError([&] { N::patchRows(x, 7, 3, 0, 0, 1); }, {"patchRows", "7 x 3", "does not fit"});
  expectError([&] { N::patchRows(x, 3, 3, -1, 0, 1); }, {"patchRows", "pad"});
  expectError([&] { N::patchRows(x, 3, 3, 1, 0, 1, DType::I8); }, {"patchRows", "dtype"});
  expectError([&] { N::lazyConv(T::ones({4, 17}), x, 3, 3, 1, DType::F32); }, {"lazyConv", "w", "17 inputs", "18"});
  expectError([&] { N::lazyConv(T::ones({4, 18}), x, 3, 3, 1, DType::I32); }, {"lazyConv", "compute"});
  expectError([&] { N::lazyConv3(T::ones({3, 54}), T::ones({2, 2, 4, 5})); }, {"lazyConv3", "x", "n >= 1"});
  expectError([&] { N::lazyConv3(T::ones({3, 50}), T::ones({4, 2, 4, 5})); }, {"lazyConv3", "w", "27 c = 54"});
  expectError([&] { N::lazyConv3(T::ones({3, 54}), T::ones({4, 2, 4})); }, {"lazyConv3", "x", "rank 4"});
}
