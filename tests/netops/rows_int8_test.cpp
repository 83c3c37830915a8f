// ConvRot's INT8 / INT4 rows (int8Rows, int8RowsInto, modulatedInt8RowsInto) against the numpy
// references of tests/reference/make_netops_rows_fixtures.py.
//
// Tolerances (measured on the fixtures):
//   codes q and scales s: exact (the script takes the spec's F32 steps; the codes are integers).
//   q s against the exact product y (F64, by the Kronecker matrix): within s / 2 + 2^-20 max|y|,
//   which is the quantization step plus the F32 transform's rounding.
#include <gizml/netops_rows.h>
#include <gtest/gtest.h>

#include <cmath>

#include "common/expect_error.h"
#include "netops/rows_fixture.h"

using namespace gizml;
namespace N = gizml::netops;

TEST(NetopsRowsInt8, CodesAndScalesMatchTheReference) {
  const auto all = rows_fixture::ofOp("int8rows");
  ASSERT_EQ(all.size(), 3u);
  for (const auto* c : all) {
    SCOPED_TRACE(c->name);
    const auto x = rows_fixture::tensor(*c, "x");
    const int64_t bits = c->attr("bits");
    const auto qs = N::int8Rows(x, bits);
    ASSERT_EQ(qs.size(), 2u);
    EXPECT_EQ(qs[0].shape(), x.shape());
    EXPECT_EQ(qs[1].shape(), (T::Shape{x.size(0), 1}));
    EXPECT_EQ(qs[0].toDoubles(), rows_fixture::values(c->array("q")));
    EXPECT_EQ(qs[1].toDoubles(), rows_fixture::values(c->array("s")));
    // Dequantized, the codes are the exact rotation to half a step.
    const auto y = rows_fixture::values(c->array("y"));
    const auto q = qs[0].toDoubles(), s = qs[1].toDoubles();
    const int64_t width = x.size(1);
    for (int64_t r = 0; r < x.size(0); ++r) {
      double largest = 0;
      for (int64_t i = 0; i < width; ++i) largest = std::max(largest, std::fabs(y[r * width + i]));
      for (int64_t i = 0; i < width; ++i)
        ASSERT_LE(std::fabs(q[r * width + i] * s[r] - y[r * width + i]), s[r] / 2 + largest * 0x1p-20) << r << "," << i;
    }
    // Into I8 codes: the same values.
    auto q8 = T::zeros(x.shape(), DType::I8), s8 = T::zeros({x.size(0), 1});
    N::int8RowsInto(x, q8, s8, bits);
    EXPECT_EQ(q8.toDoubles(), qs[0].toDoubles());
    EXPECT_EQ(s8.toDoubles(), qs[1].toDoubles());
  }
}

TEST(NetopsRowsInt8, FourBitCodesGoIntoI4) {
  // The reference's 4-bit codes (F32 on the host), packed two a byte into an I4 q: the same
  // integers, the even element in the low nibble. Without bits, an I4 q means 4 bits.
  const auto& c = rows_fixture::find("int8_w512_b4");
  const auto x = rows_fixture::tensor(c, "x");
  const auto want = rows_fixture::values(c.array("q"));
  auto q = T::zeros(x.shape(), DType::I4), s = T::zeros({x.size(0), 1});
  N::int8RowsInto(x, q, s);
  EXPECT_EQ(q.toDoubles(), want);
  EXPECT_EQ(s.toDoubles(), rows_fixture::values(c.array("s")));
  const auto* bytes = static_cast<const uint8_t*>(q.rawData());
  for (size_t k = 0; k < want.size() / 2; ++k) {
    const int lo = static_cast<int>(want[2 * k]) & 15, hi = static_cast<int>(want[2 * k + 1]) & 15;
    ASSERT_EQ(bytes[k], lo | (hi << 4)) << "byte " << k;
  }
  // modulatedInt8RowsInto writes I4 the same way as int8Rows of its rows.
  const auto& m = rows_fixture::find("modint8_c1");
  const auto mx = rows_fixture::tensor(m, "x");
  const auto w = rows_fixture::tensor(m, "w"), shift = rows_fixture::tensor(m, "shift");
  const auto scale = rows_fixture::tensor(m, "scale"), map = rows_fixture::tensor(m, "map");
  auto q4 = T::zeros(mx.shape(), DType::I4), s4 = T::zeros({mx.size(0), 1});
  N::modulatedInt8RowsInto(mx, w, shift, scale, map, 1e-6, std::nullopt, q4, s4, true);
  const auto codes = N::int8Rows(N::modulatedNorm(mx, w, shift, scale, map, 1e-6, true), 4);
  EXPECT_EQ(q4.toDoubles(), codes[0].toDoubles());
  EXPECT_EQ(s4.toDoubles(), codes[1].toDoubles());
}

TEST(NetopsRowsInt8, RegularHadamardSpreadsAConstantRowEvenly) {
  // Every row of the regular Hadamard matrix over 16 sums to 1, so a row of ones stays ones:
  // every code is the largest, 127 (or 7), s = 1/127 (1/7).
  const auto ones = T::ones({1, 512});
  auto q = N::int8Rows(ones, 8);
  for (double v : q[0].toDoubles()) ASSERT_EQ(v, 127.0);
  EXPECT_FLOAT_EQ(static_cast<float>(q[1].item()), 1.0f / 127.0f);
  q = N::int8Rows(ones, 4);
  for (double v : q[0].toDoubles()) ASSERT_EQ(v, 7.0);
  // One spike spreads over its whole group as +-1/16 of it (and leaves the other group zero).
  auto spike = T::zeros({1, 512});
  spike.data<float>()[3] = 16.0f;
  q = N::int8Rows(spike, 8);
  const auto codes = q[0].toDoubles();
  for (int i = 0; i < 256; ++i) ASSERT_EQ(std::fabs(codes[i]), 127.0) << i;
  for (int i = 256; i < 512; ++i) ASSERT_EQ(codes[i], 0.0) << i;
}

TEST(NetopsRowsInt8, ModulatedRowsQuantizeInOnePass) {
  const auto& c = rows_fixture::find("modint8_c1");
  const auto x = rows_fixture::tensor(c, "x"), w = rows_fixture::tensor(c, "w");
  const auto shift = rows_fixture::tensor(c, "shift"), scale = rows_fixture::tensor(c, "scale");
  const auto map = rows_fixture::tensor(c, "map");
  auto y = T::zeros(x.shape()), q = T::zeros(x.shape(), DType::I8), s = T::zeros({x.size(0), 1});
  N::modulatedInt8RowsInto(x, w, shift, scale, map, 1e-6, y, q, s, true);
  EXPECT_EQ(rows_fixture::maxUlps(y, rows_fixture::values(c.array("y"))), 0);
  EXPECT_EQ(q.toDoubles(), rows_fixture::values(c.array("q")));
  EXPECT_EQ(s.toDoubles(), rows_fixture::values(c.array("s")));
  // The same as int8Rows of modulatedNorm's rows, and y is optional.
  const auto again = N::int8Rows(N::modulatedNorm(x, w, shift, scale, map, 1e-6, true));
  auto q2 = T::zeros(x.shape()), s2 = T::zeros({x.size(0), 1});
  N::modulatedInt8RowsInto(x, w, shift, scale, map, 1e-6, std::nullopt, q2, s2, true);
  EXPECT_EQ(q2.toDoubles(), again[0].toDoubles());
  EXPECT_EQ(s2.toDoubles(), again[1].toDoubles());
}

TEST(NetopsRowsInt8, BadInputNamesTheArgument) {
  expectError([] { N::int8Rows(T::ones({2, 300})); }, {"int8Rows", "width 300", "multiple of 256"});
  expectError([] { N::int8Rows(T::ones({512})); }, {"int8Rows", "x", "rank 2"});
  expectError([] { N::int8Rows(T::ones({1, 256}), 5); }, {"int8Rows", "bits", "8 or 4"});
  expectError([] { N::int8RowsInto(T::ones({2, 256}), T::zeros({2, 128}, DType::I8), T::zeros({2, 1})); },
              {"int8RowsInto", "q", "[2, 128]", "[2, 256]"});
  expectError([] { N::int8RowsInto(T::ones({2, 256}), T::zeros({2, 256}, DType::I32), T::zeros({2, 1})); },
              {"int8RowsInto", "q", "I8, I4 or F32"});
  // An I4 q holds 4-bit codes only, of x's shape.
  expectError([] { N::int8RowsInto(T::ones({2, 256}), T::zeros({2, 256}, DType::I4), T::zeros({2, 1}), 8); },
              {"int8RowsInto", "q is I4", "bits is 8"});
  expectError([] { N::int8RowsInto(T::ones({2, 256}), T::zeros({2, 255}, DType::I4), T::zeros({2, 1})); },
              {"int8RowsInto", "q", "[2, 255]", "[2, 256]"});
  expectError([] { N::int8RowsInto(T::ones({2, 256}), T::zeros({2, 256}, DType::I8), T::zeros({2, 1}), 3); },
              {"int8RowsInto", "bits", "8 or 4"});
  expectError([] { N::int8RowsInto(T::ones({2, 256}), T::zeros({2, 256}), T::zeros({2})); },
              {"int8RowsInto", "s", "[2, 1]"});
  const auto x = T::ones({2, 256}), w = T::ones({256}), mod = T::zeros({1, 256});
  auto q = T::zeros({2, 256}), s = T::zeros({2, 1});
  expectError([&] { N::modulatedInt8RowsInto(x, w, mod, mod, T::tensor({2}, {0, 1}), 1e-6, std::nullopt, q, s); },
              {"modulatedInt8RowsInto", "map[1]", "not a row index"});
  expectError([&] { N::modulatedInt8RowsInto(T::ones({2, 128}), T::ones({128}), T::zeros({1, 128}), T::zeros({1, 128}),
                                             T::zeros({2}), 1e-6, std::nullopt, q, s); },
              {"modulatedInt8RowsInto", "multiple of 256"});
}
