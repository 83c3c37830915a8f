// The I4 dtype: its packing (two elements a byte, the low nibble first) and casts against
// tests/data/tensor/i4.txt (ml_dtypes' int4 values packed by hand, numpy's rint and clip; made by
// tests/reference/make_i4_fixtures.py), printing, the view rule and elementwise work by widening.
#include <gizml/tensor.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "common/expect_error.h"
#include "common/test_paths.h"

using namespace gizml;
using T::Shape;

namespace {

// "case dtype role" -> the line's values.
const std::map<std::string, std::vector<double>>& fixture() {
  static const auto lines = [] {
    std::map<std::string, std::vector<double>> out;
    std::ifstream in(test_paths::testData() + "/tensor/i4.txt");
    EXPECT_TRUE(in) << "tests/data/tensor/i4.txt is missing";
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream words(line);
      std::string kase, dtype, role, word;
      words >> kase >> dtype >> role;
      auto& values = out[kase + " " + dtype + " " + role];
      while (words >> word) values.push_back(std::strtod(word.c_str(), nullptr));
    }
    return out;
  }();
  return lines;
}

const std::vector<double>& values(const std::string& key) {
  const auto it = fixture().find(key);
  if (it == fixture().end()) throw std::runtime_error("no line '" + key + "' in i4.txt");
  return it->second;
}

const std::pair<const char*, DType> kDTypes[] = {
    {"f32", DType::F32}, {"f16", DType::F16}, {"bf16", DType::BF16}, {"f64", DType::F64}, {"i8", DType::I8},
    {"u8", DType::U8},   {"i32", DType::I32}, {"i64", DType::I64},   {"bool", DType::Bool}};

T::Tensor i4(const Shape& shape, const std::vector<double>& v) { return T::tensor(shape, v, DType::I4); }

std::vector<int64_t> ints(const std::vector<double>& v) { return std::vector<int64_t>(v.begin(), v.end()); }

// 16 distinct values -8..7 in a [4, 4] tensor, and the same as I8 (the reference for views).
const std::vector<double> kGrid = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};

}  // namespace

TEST(I4, PacksTwoElementsAByteLowNibbleFirst) {
  const auto& v = values("pack i4 values");
  const auto& packed = values("pack u8 bytes");
  ASSERT_EQ(v.size(), 17u);
  const auto x = i4({17}, v);
  EXPECT_EQ(x.dtype(), DType::I4);
  EXPECT_EQ(x.storage()->bytes(), 9u);  // ceil(17 / 2)
  EXPECT_EQ(dtypeBytes(DType::I4, 17), 9u);
  const auto* bytes = static_cast<const uint8_t*>(x.rawData());
  for (size_t i = 0; i < packed.size(); ++i) EXPECT_EQ(bytes[i], packed[i]) << "byte " << i;
  // And the other way: the packed bytes read back as the values.
  auto y = T::empty({17}, DType::I4);
  for (size_t i = 0; i < packed.size(); ++i) static_cast<uint8_t*>(y.rawData())[i] = static_cast<uint8_t>(packed[i]);
  EXPECT_EQ(y.toInts(), ints(v));
  expectError([] { (void)dtypeSize(DType::I4); }, {"i4", "two elements a byte"});
}

TEST(I4, CreationTakesTheDType) {
  EXPECT_EQ(T::zeros({3}, DType::I4).toInts(), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(T::ones({2, 3}, DType::I4).toInts(), (std::vector<int64_t>(6, 1)));
  EXPECT_EQ(T::full({5}, -3, DType::I4).toInts(), (std::vector<int64_t>(5, -3)));
  EXPECT_EQ(T::scalar(6, DType::I4).item(), 6.0);
  EXPECT_EQ(T::arange(-8, 8, 1, DType::I4).toInts(), ints(kGrid));
  EXPECT_EQ(T::linspace(-8, 7, 16, DType::I4).toInts(), ints(kGrid));
  // Values are cast as from F64: to nearest even, saturating.
  EXPECT_EQ(i4({4}, {2.5, -9, 100, 3.5}).toInts(), (std::vector<int64_t>{2, -8, 7, 4}));
}

TEST(I4, CastsFromEveryDTypeRoundToNearestEvenAndSaturate) {
  for (const auto& [name, dtype] : kDTypes) {
    SCOPED_TRACE(name);
    const std::string key = std::string("to_i4 ") + name;
    const auto& in = values(key + " in");
    const auto x = T::tensor({static_cast<int64_t>(in.size())}, in, dtype);
    const auto y = x.cast(DType::I4);
    EXPECT_EQ(y.dtype(), DType::I4);
    EXPECT_EQ(y.toInts(), ints(values(key + " out")));
    // Lazily, inside an expression, the same.
    EXPECT_EQ(T::lazy(x).cast(DType::I4).eval().toInts(), ints(values(key + " out")));
  }
}

TEST(I4, CastsToEveryDTypeAreExact) {
  const auto x = i4({16}, values("from_i4 i4 in"));
  for (const auto& [name, dtype] : kDTypes) {
    SCOPED_TRACE(name);
    const auto y = x.cast(dtype);
    EXPECT_EQ(y.dtype(), dtype);
    EXPECT_EQ(y.toDoubles(), values(std::string("from_i4 ") + name + " out"));
    // Back to I4: every dtype holding [-8, 7] gives the values again.
    if (dtype != DType::U8 && dtype != DType::Bool) {
      EXPECT_EQ(y.cast(DType::I4).toInts(), x.toInts());
    }
  }
}

TEST(I4, PrintsIntegers) {
  EXPECT_EQ(i4({2, 3}, {-8, 7, 0, 1, -1, 3}).text(), "[[-8, 7, 0], [1, -1, 3]]");
  EXPECT_EQ(T::scalar(-5, DType::I4).text(), "-5");
  EXPECT_EQ(std::string(dtypeName(DType::I4)), "i4");
}

TEST(I4, ViewsThatKeepBytesWhole) {
  const auto x = i4({4, 4}, kGrid), ref = T::tensor({4, 4}, kGrid, DType::I8);
  auto same = [](const T::Tensor& a, const T::Tensor& b) {
    EXPECT_EQ(a.dtype(), DType::I4);
    EXPECT_EQ(a.shape(), b.shape());
    EXPECT_EQ(a.toInts(), b.toInts());
  };
  // Pairs of columns, whole rows, broadcasts, unit axes: views of the same bytes.
  const auto left = x.slice(1, 0, 2);
  EXPECT_EQ(left.storage(), x.storage());
  same(left, ref.slice(1, 0, 2));
  same(x.slice(1, 2, 4), ref.slice(1, 2, 4));
  same(x.slice(0, 1, 3), ref.slice(0, 1, 3));
  same(x.slice(0, 0, 4, 2), ref.slice(0, 0, 4, 2));
  same(x.slice(1, 0, 4).slice(0, 3, 4), ref.slice(0, 3, 4));
  same(x.reshape({16}).expand({3, 16}), ref.reshape({16}).expand({3, 16}));
  same(i4({1}, {5}).expand({7}), T::tensor({1}, {5}, DType::I8).expand({7}));
  same(x.unsqueeze(1).squeeze(1), ref);
  same(x.reshape({2, 8}).permute({0, 1}), ref.reshape({2, 8}));
  same(x.unsqueeze(0).transpose(0, 1), ref.unsqueeze(0).transpose(0, 1));  // only a unit axis moves
  // A contiguous tensor of odd rows is one run of nibbles: its row prefix is a view too.
  const auto odd = i4({3, 3}, {1, 2, 3, 4, 5, 6, 7, -8, -7});
  same(odd.slice(0, 0, 2), T::tensor({3, 3}, {1, 2, 3, 4, 5, 6, 7, -8, -7}, DType::I8).slice(0, 0, 2));
  // The views copy into contiguous I4 tensors with the same values.
  same(left.contiguous(), ref.slice(1, 0, 2));
  EXPECT_TRUE(left.contiguous().isContiguous());
}

TEST(I4, ViewsThatWouldSplitAByteAreErrors) {
  const auto x = i4({4, 4}, kGrid);
  expectError([&] { (void)x.slice(1, 1, 3); }, {"slice", "i4", "middle of a byte", "cast(i8)"});
  expectError([&] { (void)x.slice(1, 0, 4, 2); }, {"slice", "i4", "two elements of a byte apart"});
  expectError([&] { (void)x.slice(1, 0, 3); }, {"slice", "i4", "apart"});  // odd columns: a byte's half
  expectError([&] { (void)x.transpose(0, 1); }, {"permute", "i4", "apart"});
  expectError([&] { (void)x.permute({1, 0}); }, {"permute", "i4", "apart"});
  expectError([&] { (void)i4({3, 3}, {1, 2, 3, 4, 5, 6, 7, 0, 1}).slice(0, 1, 3); }, {"slice", "middle of a byte", "element 3"});
  expectError([&] { (void)x.reshape({8, 2}).slice(0, 0, 8, 2).expand({2, 4, 2}).slice(2, 1, 2); },
              {"slice", "middle of a byte"});
  // reshape copies where a view would split a byte (its contract: "copies only if not viewable").
  const auto cols = x.slice(1, 0, 2);
  const auto flat = cols.reshape({8});
  EXPECT_NE(flat.storage(), x.storage());
  EXPECT_EQ(flat.toInts(), (std::vector<int64_t>{-8, -7, -4, -3, 0, 1, 4, 5}));
  EXPECT_EQ(x.reshape({2, 8}).storage(), x.storage());  // contiguous: a view
  // A strided I4 destination would be written a nibble at a time.
  expectError([&] { T::assign(cols, T::zeros({4, 2})); }, {"assign", "i4", "contiguous"});
  auto whole = T::zeros({4, 4}, DType::I4);
  T::assign(whole, T::full({4}, 2.6));
  EXPECT_EQ(whole.toInts(), (std::vector<int64_t>(16, 3)));
}

TEST(I4, ElementwiseWidensAndWrapsAsI8Does) {
  const auto x = i4({16}, kGrid), y = i4({16}, std::vector<double>(kGrid.rbegin(), kGrid.rend()));
  const auto ref = T::tensor({16}, kGrid, DType::I64);
  // I4 with I4 stays I4, computed in i64 and wrapped to 4 bits as I8 wraps to 8.
  const auto sum = x.add(x);
  EXPECT_EQ(sum.dtype(), DType::I4);
  std::vector<int64_t> wrapped;
  for (int64_t v : ref.add(ref).toInts()) wrapped.push_back(((v & 15) ^ 8) - 8);
  EXPECT_EQ(sum.toInts(), wrapped);
  EXPECT_EQ(x.mul(y).dtype(), DType::I4);
  EXPECT_EQ(x.neg().toInts()[0], -8);  // -(-8) wraps, as in two's complement
  EXPECT_EQ(promoteTypes(DType::I4, DType::I8), DType::I8);
  EXPECT_EQ(promoteTypes(DType::I4, DType::U8), DType::I32);
  EXPECT_EQ(promoteTypes(DType::I4, DType::F16), DType::F16);
  EXPECT_EQ(promoteTypes(DType::Bool, DType::I4), DType::I4);
  EXPECT_EQ(x.add(T::tensor({16}, kGrid, DType::I8)).toInts(), ref.add(ref).toInts());
  EXPECT_EQ(x.mul(T::scalar(0.5)).toDoubles(), ref.mul(T::scalar(0.5)).toDoubles());
  EXPECT_EQ(x.lt(y).toInts(), ref.lt(T::tensor({16}, std::vector<double>(kGrid.rbegin(), kGrid.rend()), DType::I64)).toInts());
  // Reductions widen: sums give I64, max keeps I4; along any axis (no byte-splitting views).
  const auto g = i4({4, 4}, kGrid), gref = T::tensor({4, 4}, kGrid, DType::I64);
  EXPECT_EQ(g.sum().item(), -8.0);
  EXPECT_EQ(g.sum({0}).toInts(), gref.sum({0}).toInts());
  EXPECT_EQ(g.max({0}).dtype(), DType::I4);
  EXPECT_EQ(g.max({0}).toInts(), gref.max({0}).toInts());
  EXPECT_EQ(g.cumsum(0).toInts(), gref.cumsum(0).toInts());
  EXPECT_EQ(g.softmax(0).toFloats(), gref.softmax(0).toFloats());
  // matmul sums exactly in i64, then casts to I4: saturating.
  std::vector<int64_t> product;
  for (int64_t v : gref.matmul(gref).toInts()) product.push_back(std::clamp<int64_t>(v, -8, 7));
  EXPECT_EQ(g.matmul(g).dtype(), DType::I4);
  EXPECT_EQ(g.matmul(g).toInts(), product);
}

TEST(I4, JoinsAndSelectsAsI8) {
  const auto x = i4({4, 4}, kGrid), ref = T::tensor({4, 4}, kGrid, DType::I8);
  const auto idx = T::tensor({3}, {3, 0, 3}, DType::I64);
  auto check = [](const T::Tensor& got, const T::Tensor& want) {
    EXPECT_EQ(got.dtype(), DType::I4);
    EXPECT_EQ(got.shape(), want.shape());
    EXPECT_EQ(got.toInts(), want.toInts());
  };
  check(T::concat({x, x.slice(0, 0, 1)}, 0), T::concat({ref, ref.slice(0, 0, 1)}, 0));
  check(T::concat({x, x}, 1), T::concat({ref, ref}, 1));
  check(T::stack({x, x}, 2), T::stack({ref, ref}, 2));
  check(x.indexSelect(1, idx), ref.indexSelect(1, idx));
  const auto at = T::tensor({4, 4}, std::vector<double>(16, 2), DType::I64);
  check(T::gather(x, 1, at), T::gather(ref, 1, at));
}

TEST(I4, OddRowsWrittenByManyBlocksKeepEveryNibble) {
  // Rows of odd length put a row's last element and the next row's first in one byte; the
  // evaluator must not let two threads write it. 3 rows of 40001 values (a transposed operand:
  // the rows stay rows), each cast to the nearest code.
  const auto x = T::uniform(T::Key(4), {40001, 3}, -9.0, 9.0).transpose(0, 1);
  const auto got = x.cast(DType::I4).toInts();
  const auto f = x.toFloats();
  ASSERT_EQ(got.size(), f.size());
  for (size_t i = 0; i < f.size(); ++i)
    ASSERT_EQ(got[i], std::clamp<int64_t>(static_cast<int64_t>(std::nearbyint(f[i])), -8, 7)) << i;
  // And read back through a view that starts at a row of even offset.
  EXPECT_EQ(x.cast(DType::I4).slice(0, 2, 3).toInts(), x.slice(0, 2, 3).cast(DType::I4).toInts());
}
