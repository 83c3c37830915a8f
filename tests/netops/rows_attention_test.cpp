// Attention over packed rows (headPrepInPlace, attendedRows / attentionRows with groups, queries
// and prep, crossAttentionRows) and NATTEN's neighborhood3d against the numpy references of
// tests/reference/make_netops_rows_fixtures.py.
//
// Tolerances (measured on the fixtures):
//   headPrepInPlace: 0 ulps (the same F32 steps, no fma).
//   attention (all kinds) against float64 softmax of the F32 inputs: the largest error relative
//   to the largest output below 1e-6 (measured worst 1.3e-7 for rows, 2.3e-7 for na3d).
#include <gizml/netops_rows.h>
#include <gtest/gtest.h>

#include <cmath>

#include "common/expect_error.h"
#include "netops/rows_fixture.h"

using namespace gizml;
namespace N = gizml::netops;

namespace {

constexpr double kAttentionTolerance = 1e-6;

N::HeadPrep prepOf(const fixture::Case& c) {
  N::HeadPrep p;
  p.qw = rows_fixture::tensor(c, "qw");
  p.kw = rows_fixture::tensor(c, "kw");
  p.cos = rows_fixture::tensor(c, "cos");
  p.sin = rows_fixture::tensor(c, "sin");
  p.eps = c.attr("eps_e9") * 1e-9;
  return p;
}

}  // namespace

TEST(NetopsRowsAttention, HeadPrepNormsAndTurnsQAndKInPlace) {
  const auto& c = rows_fixture::find("headprep_n7_row2");
  auto qkv = rows_fixture::tensor(c, "qkv");
  N::headPrepInPlace(qkv, c.attr("n"), c.attr("heads"), c.attr("head"), prepOf(c), c.attr("row0"));
  EXPECT_EQ(rows_fixture::maxUlps(qkv, rows_fixture::values(c.array("out"))), 0);
}

TEST(NetopsRowsAttention, HeadPrepWithoutRotaryOnlyNorms) {
  // cos and sin left default: each q and k head over its RMS times its weight, v untouched.
  auto qkv = T::normal(T::Key(3), {3, 3 * 2 * 4}, 0.0, 5.0);
  const auto before = qkv.toDoubles();
  N::HeadPrep p;
  p.qw = T::ones({4});
  p.kw = T::full({4}, 2.0);
  N::headPrepInPlace(qkv, 3, 2, 4, p, 0);
  const auto v = qkv.toDoubles();
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t part = 0; part < 2; ++part)
      for (int64_t h = 0; h < 2; ++h) {
        double ss = 0;
        for (int64_t i = 0; i < 4; ++i) ss += v[r * 24 + part * 8 + h * 4 + i] * v[r * 24 + part * 8 + h * 4 + i];
        EXPECT_NEAR(ss / 4, part == 0 ? 1.0 : 4.0, 1e-5);
      }
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t i = 16; i < 24; ++i) EXPECT_EQ(v[r * 24 + i], before[r * 24 + i]);
}

TEST(NetopsRowsAttention, AttendedRowsWithGroupsQueriesAndPrep) {
  const auto all = rows_fixture::ofOp("attendedrows");
  ASSERT_EQ(all.size(), 4u);
  for (const auto* c : all) {
    SCOPED_TRACE(c->name);
    const auto qkv = rows_fixture::tensor(*c, "qkv");
    const auto before = qkv.toDoubles();
    std::vector<N::HeadPrep> prep;
    if (c->attr("prep")) prep.push_back(prepOf(*c));
    const auto out = N::attendedRows(qkv, c->attr("heads"), c->attr("head"), false, c->attr("group"), prep,
                                     c->attr("queries"));
    const auto want = rows_fixture::values(c->array("out"));
    EXPECT_EQ(out.shape(), c->array("out").shape);
    const double err = rows_fixture::maxScaledError(out, want);
    EXPECT_LT(err, kAttentionTolerance);
    EXPECT_EQ(qkv.toDoubles(), before);  // the host prepares a copy
    // quantized has no effect on the host; attentionRows writes the same into out.
    auto into = T::zeros(out.shape());
    N::attentionRows(qkv, c->attr("heads"), c->attr("head"), true, c->attr("group"), into, prep, c->attr("queries"));
    EXPECT_EQ(into.toDoubles(), out.toDoubles());
  }
}

TEST(NetopsRowsAttention, CrossAttention) {
  const auto& c = rows_fixture::find("cross_h2");
  const auto q = rows_fixture::tensor(c, "q");
  auto out = T::zeros(q.shape());
  N::crossAttentionRows(q, rows_fixture::tensor(c, "kv"), c.attr("heads"), c.attr("head"), out);
  EXPECT_LT(rows_fixture::maxScaledError(out, rows_fixture::values(c.array("out"))), kAttentionTolerance);
}

TEST(NetopsRowsAttention, NeighborhoodWindowsAtTheEdges) {
  const auto all = rows_fixture::ofOp("neighborhood3d");
  ASSERT_EQ(all.size(), 3u);
  for (const auto* c : all) {
    SCOPED_TRACE(c->name);
    const auto out = N::neighborhood3d(rows_fixture::tensor(*c, "qkv"), c->list("grid"), c->list("kernel"),
                                       c->attr("heads"), c->attr("scale_e6") * 1e-6);
    const double err = rows_fixture::maxScaledError(out, rows_fixture::values(c->array("out")));
    EXPECT_LT(err, kAttentionTolerance);
  }
}

TEST(NetopsRowsAttention, NeighborhoodOfTheWholeGridIsFullAttention) {
  // A window as large as the grid sees every key in row order: the same steps as attendedRows.
  const auto qkv = T::normal(T::Key(5), {3 * 3 * 5, 3 * 2 * 8});
  const auto full = N::attendedRows(qkv, 2, 8, false, 0);
  const auto na = N::neighborhood3d(qkv, {3, 3, 5}, {3, 5, 9}, 2, 1.0 / std::sqrt(8.0));
  EXPECT_EQ(na.toDoubles(), full.toDoubles());
}

TEST(NetopsRowsAttention, BadInputNamesTheArgument) {
  const auto qkv = T::ones({4, 3 * 2 * 8});
  expectError([&] { N::attendedRows(qkv, 3, 8, false, 0); }, {"attendedRows", "qkv", "48 wide", "3 heads head"});
  expectError([&] { N::attendedRows(T::ones({4, 2, 48}), 2, 8, false, 0); }, {"qkv", "rank 2"});
  expectError([&] { N::attendedRows(qkv, 2, 8, false, -1); }, {"group"});
  expectError([&] { N::attendedRows(qkv, 2, 8, false, 0, {}, 5); }, {"queries 5"});
  N::HeadPrep p{T::ones({8}), T::ones({8}), T::zeros({0, 0}), T::zeros({0, 0}), 1e-6};
  expectError([&] { N::attendedRows(qkv, 2, 8, false, 0, {p, p}); }, {"prep", "at most one"});
  N::HeadPrep badW = p;
  badW.kw = T::ones({7});
  expectError([&] { N::attendedRows(qkv, 2, 8, false, 0, {badW}); }, {"prep.kw", "[7]", "[8]"});
  N::HeadPrep longTurn = p;
  longTurn.cos = longTurn.sin = T::zeros({4, 5});
  expectError([&] { N::headPrepInPlace(qkv.clone(), 4, 2, 8, longTurn, 0); }, {"headPrepInPlace", "prep.cos", "head of 8"});
  N::HeadPrep fewRows = p;
  fewRows.cos = fewRows.sin = T::zeros({3, 2});
  expectError([&] { N::headPrepInPlace(qkv.clone(), 4, 2, 8, fewRows, 0); }, {"headPrepInPlace", "prep.cos", "has 3"});
  expectError([&] { N::headPrepInPlace(qkv.clone(), 5, 2, 8, p, 0); }, {"headPrepInPlace", "n 5"});
  auto out = T::zeros({4, 15});
  expectError([&] { N::attentionRows(qkv, 2, 8, false, 0, out); }, {"attentionRows", "out", "[4, 15]", "[4, 16]"});
  expectError([&] { N::crossAttentionRows(T::ones({2, 16}), T::ones({3, 30}), 2, 8, T::zeros({2, 16})); },
              {"crossAttentionRows", "kv", "2 heads head"});
  expectError([&] { N::crossAttentionRows(T::ones({2, 12}), T::ones({3, 32}), 2, 8, T::zeros({2, 16})); },
              {"crossAttentionRows", "q", "12 wide"});
  const auto grid = T::ones({2 * 3 * 4, 3 * 2 * 4});
  expectError([&] { N::neighborhood3d(grid, {2, 3, 4}, {1, 3, 2}, 2, 0.5); }, {"neighborhood3d", "kernel[2]", "odd", "2"});
  expectError([&] { N::neighborhood3d(grid, {2, 3, 4}, {3, 3}, 2, 0.5); }, {"neighborhood3d", "kernel", "[kt, kh, kw]"});
  expectError([&] { N::neighborhood3d(grid, {2, 3, 5}, {1, 1, 1}, 2, 0.5); }, {"neighborhood3d", "qkv", "24 rows", "30"});
  expectError([&] { N::neighborhood3d(grid, {2, 3, 4}, {1, 1, 1}, 5, 0.5); }, {"neighborhood3d", "qkv", "heads 5"});
  expectError([&] { N::neighborhood3d(grid, {2, 0, 4}, {1, 1, 1}, 2, 0.5); }, {"neighborhood3d", "grid[1]"});
}
