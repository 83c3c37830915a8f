// Bad input throws gizml::Error with a message naming what is wrong.
#include <gizml/tensor.h>
#include <gtest/gtest.h>

#include "common/expect_error.h"

#include <cmath>

#include <string>

using namespace gizml;


TEST(Errors, ShapeMismatches) {
  const auto a = T::zeros({2, 3}), b = T::zeros({4, 3});
  expectError([&] { a.add(b); }, {"[2, 3]", "[4, 3]", "broadcast"});
  expectError([&] { a.matmul(T::zeros({2, 3})); }, {"matmul", "[2, 3]"});
  expectError([&] { T::matmul(T::zeros({2, 2, 3}), T::zeros({3, 3, 2})); }, {"[2]", "[3]"});
  expectError([&] { T::tensor({2, 2}, {1, 2, 3}); }, {"[2, 2]", "4", "3"});
  expectError([&] { a.reshape({4, 2}); }, {"[4, 2]", "6"});
  expectError([&] { a.reshape({-1, -1}); }, {"-1"});
  expectError([&] { a.expand({3, 3}); }, {"[2, 3]", "[3, 3]"});
  expectError([&] { T::concat({a, T::zeros({2, 4})}, 0); }, {"[2, 4]", "[2, 3]"});
  expectError([&] { T::stack({a, b}, 0); }, {"[4, 3]"});
}

TEST(Errors, BadAxes) {
  const auto a = T::zeros({2, 3});
  expectError([&] { a.sum({2}); }, {"sum", "axis 2", "rank 2"});
  expectError([&] { a.sum({0, 0}); }, {"repeated"});
  expectError([&] { a.permute({0, 0}); }, {"repeated"});
  expectError([&] { a.permute({0}); }, {"permute"});
  expectError([&] { a.squeeze(0); }, {"squeeze", "length 2"});
  expectError([&] { a.softmax(-3); }, {"softmax", "-3"});
  expectError([&] { a.transpose(0, 5); }, {"transpose", "5"});
  expectError([&] { a.argmax(3); }, {"argmax"});
}

TEST(Errors, SlicesAndIndices) {
  const auto a = T::zeros({5});
  expectError([&] { a.slice(0, 0, 5, 0); }, {"step 0"});
  expectError([&] { a.indexSelect(0, T::tensor({2}, {1, 5}, DType::I64)); }, {"index 5", "length 5"});
  expectError([&] { a.indexSelect(0, T::tensor({1}, {1})); }, {"integers", "f32"});
  expectError([&] { T::gather(T::zeros({2, 2}), 1, T::tensor({2, 1}, {0, 2}, DType::I32)); }, {"index 2"});
}

TEST(Errors, EmptyAndOverflow) {
  expectError([&] { T::zeros({0, 3}).max({0}); }, {"max", "empty"});
  expectError([&] { T::zeros({0}).argmax(0); }, {"argmax", "empty"});
  expectError([&] { T::zeros({int64_t{1} << 40, int64_t{1} << 40}); }, {"64 bits"});
  expectError([&] { T::zeros({-1, 2}); }, {"negative"});
  expectError([&] { T::zeros({int64_t{1} << 62}); }, {"too large"});
  expectError([&] { T::arange(0, 1, 0); }, {"step"});
  expectError([&] { T::scalar(1).item(); T::zeros({2}).item(); }, {"2 elements"});
  // Sums of empty axes are the identities, as numpy's.
  EXPECT_EQ(T::zeros({0, 3}).sum({0}).text(), "[0, 0, 0]");
  EXPECT_EQ(T::zeros({0, 3}).prod({0}).text(), "[1, 1, 1]");
}

TEST(Errors, DTypeMisuse) {
  expectError([&] { T::tensor({1}, {NAN}, DType::I32); }, {"i32"});
  expectError([&] { T::uniform(T::Key(1), {2}, 0, 1, DType::I32); }, {"uniform", "i32"});
  expectError([&] { T::lazy(T::zeros({2})).evalInto(T::zeros({2}, DType::I32)); }, {"evalInto", "i32"});
}
