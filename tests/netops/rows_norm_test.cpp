// The modulated norms (AdaLN plain and centered), gatedNormAddInto and pixelNormInto against the
// numpy references of tests/reference/make_netops_rows_fixtures.py.
//
// Tolerances (measured on the fixtures): the script takes the same F32 steps (sums in element
// order, no fma), so the norms agree to the bit: 0 ulps. pixelNorm with SiLU: 2 ulps (measured 2:
// the exp of two libms, then a division).
#include <gizml/netops_rows.h>
#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "netops/rows_fixture.h"

using namespace gizml;
namespace N = gizml::netops;

TEST(NetopsRowsNorm, ModulatedNormPlainAndCentered) {
  for (const char* name : {"modnorm_c0", "modnorm_c1"}) {
    SCOPED_TRACE(name);
    const auto& c = rows_fixture::find(name);
    const auto x = rows_fixture::tensor(c, "x"), w = rows_fixture::tensor(c, "w");
    const auto shift = rows_fixture::tensor(c, "shift"), scale = rows_fixture::tensor(c, "scale");
    const auto map = rows_fixture::tensor(c, "map");
    const bool centered = c.attr("centered") != 0;
    const double eps = c.attr("eps_e9") * 1e-9;
    const auto want = rows_fixture::values(c.array("out"));
    const auto y = N::modulatedNorm(x, w, shift, scale, map, eps, centered);
    EXPECT_EQ(rows_fixture::maxUlps(y, want), 0);
    // Into BF16: the F32 values rounded once.
    auto bf = T::zeros(x.shape(), DType::BF16);
    N::modulatedNormInto(x, w, shift, scale, map, eps, bf, centered);
    EXPECT_EQ(bf.toDoubles(), y.cast(DType::BF16).toDoubles());
  }
}

TEST(NetopsRowsNorm, GatedNormAddInPlace) {
  const auto& c = rows_fixture::find("gatednormadd");
  auto x = rows_fixture::tensor(c, "x");
  N::gatedNormAddInto(x, rows_fixture::tensor(c, "y").cast(DType::BF16), rows_fixture::tensor(c, "w"),
                      rows_fixture::tensor(c, "gate"), rows_fixture::tensor(c, "map"), c.attr("eps_e9") * 1e-9);
  EXPECT_EQ(rows_fixture::maxUlps(x, rows_fixture::values(c.array("out"))), 0);
}

TEST(NetopsRowsNorm, PixelNormWithSiluInPlace) {
  const auto& c = rows_fixture::find("pixelnorm_act");
  auto x = rows_fixture::tensor(c, "x");
  N::pixelNormInto(x, c.attr("eps_e9") * 1e-9, true, x);  // out may be x itself
  EXPECT_LE(rows_fixture::maxUlps(x, rows_fixture::values(c.array("out"))), 2);
  // Without SiLU each pixel's channels have mean square 1.
  auto p = rows_fixture::tensor(c, "x");
  auto out = T::zeros(p.shape());
  N::pixelNormInto(p, 0.0, false, out);
  const auto v = out.toDoubles();
  for (int64_t f = 0; f < 2; ++f)
    for (int64_t px = 0; px < 5; ++px) {
      double ss = 0;
      for (int64_t ch = 0; ch < 6; ++ch) ss += v[(f * 6 + ch) * 5 + px] * v[(f * 6 + ch) * 5 + px];
      EXPECT_NEAR(ss / 6, 1.0, 1e-6);
    }
}

TEST(NetopsRowsNorm, BadInputNamesTheArgument) {
  const auto x = T::ones({3, 8}), w = T::ones({8}), mod = T::zeros({2, 8}), map = T::tensor({3}, {0, 1, 1});
  expectError([&] { N::modulatedNorm(x, T::ones({7}), mod, mod, map, 1e-6); }, {"modulatedNorm", "w", "[7]", "[8]"});
  expectError([&] { N::modulatedNorm(x, w, T::zeros({2, 9}), mod, map, 1e-6); }, {"modulatedNorm", "shift", "width 9"});
  expectError([&] { N::modulatedNorm(x, w, mod, T::zeros({3, 8}), map, 1e-6); }, {"modulatedNorm", "scale", "[3, 8]"});
  expectError([&] { N::modulatedNorm(T::ones({3, 2, 4}), w, mod, mod, map, 1e-6); }, {"modulatedNorm", "x", "rank 2"});
  expectError([&] { N::modulatedNorm(x, w, mod, mod, T::tensor({3}, {0, 2, 1}), 1e-6); },
              {"modulatedNorm", "map[1]", "0 to 1"});
  expectError([&] { N::modulatedNorm(x, w, mod, mod, T::tensor({3}, {0, 0.5, 1}), 1e-6); },
              {"modulatedNorm", "map[1]"});
  expectError([&] { N::modulatedNorm(x, w, mod, mod, T::tensor({2}, {0, 1}), 1e-6); }, {"modulatedNorm", "map", "[2]"});
  expectError([&] { N::modulatedNorm(x, w, mod, mod, map, -1.0); }, {"modulatedNorm", "eps"});
  expectError([&] { N::modulatedNormInto(x, w, mod, mod, map, 1e-6, T::zeros({3, 8}, DType::F16)); },
              {"modulatedNormInto", "y", "F32 or BF16"});
  expectError([&] { N::gatedNormAddInto(x.clone(), T::ones({3, 8}), w, T::zeros({2, 4}), map, 1e-6); },
              {"gatedNormAddInto", "gate", "width 4"});
  expectError([&] { N::gatedNormAddInto(x.clone(), T::ones({2, 8}), w, mod, map, 1e-6); },
              {"gatedNormAddInto", "y", "[2, 8]"});
  expectError([&] { N::gatedNormAddInto(x.cast(DType::BF16), T::ones({3, 8}), w, mod, map, 1e-6); },
              {"gatedNormAddInto", "x", "F32"});
  expectError([&] { N::pixelNormInto(T::ones({2, 3}), 1e-6, false, T::ones({2, 3})); }, {"pixelNormInto", "x", "rank 3"});
  expectError([&] { N::pixelNormInto(T::ones({1, 2, 3}), 1e-6, false, T::ones({1, 2, 4})); },
              {"pixelNormInto", "out", "[1, 2, 4]"});
}
