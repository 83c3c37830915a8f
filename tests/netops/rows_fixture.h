#pragma once
// The cases of tests/data/netops_rows/rows.bin (tests/reference/make_netops_rows_fixtures.py) as
// tensors, for the rows_*_test.cpp files.
#include <gizml/tensor.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/fixture_file.h"
#include "common/test_paths.h"

namespace rows_fixture {

inline const std::vector<fixture::Case>& cases() {
  static const std::vector<fixture::Case> all = fixture::loadFixtures(test_paths::testData("/netops_rows/rows.bin"));
  return all;
}

inline const fixture::Case& find(const std::string& name) {
  for (const auto& c : cases())
    if (c.name == name) return c;
  throw std::runtime_error("no fixture case " + name);
}

/// The cases of one op, for loops over every variant the script wrote.
inline std::vector<const fixture::Case*> ofOp(const std::string& op) {
  std::vector<const fixture::Case*> out;
  for (const auto& c : cases())
    if (c.op == op) out.push_back(&c);
  return out;
}

/// An array as doubles (F32, F64 or I8).
inline std::vector<double> values(const fixture::Array& a) {
  std::vector<double> v(static_cast<size_t>(a.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    if (a.dtype == fixture::kF64) {
      std::memcpy(&v[i], a.data.data() + i * 8, 8);
    } else if (a.dtype == static_cast<uint8_t>(gizml::DType::F32)) {
      float f;
      std::memcpy(&f, a.data.data() + i * 4, 4);
      v[i] = f;
    } else if (a.dtype == static_cast<uint8_t>(gizml::DType::I8)) {
      v[i] = static_cast<int8_t>(a.data[i]);
    } else {
      throw std::runtime_error("array " + a.name + ": unexpected dtype");
    }
  }
  return v;
}

/// An F32 host tensor of the named array.
inline gizml::T::Tensor tensor(const fixture::Case& c, const std::string& name) {
  const auto& a = c.array(name);
  return gizml::T::tensor(a.shape, values(a));
}

/// The largest |got - want| over the elements relative to the largest |want| (the output's
/// scale); shapes must agree.
inline double maxScaledError(const gizml::T::Tensor& got, const std::vector<double>& want) {
  const std::vector<double> g = got.toDoubles();
  EXPECT_EQ(g.size(), want.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < g.size() && i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(g[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return worst / scale;
}

/// The largest distance in f32 ulps of want between got and want (F32 arrays).
inline int64_t maxUlps(const gizml::T::Tensor& got, const std::vector<double>& want) {
  const std::vector<float> g = got.toFloats();
  EXPECT_EQ(g.size(), want.size());
  int64_t worst = 0;
  for (size_t i = 0; i < g.size() && i < want.size(); ++i) {
    const float w = static_cast<float>(want[i]);
    const double ulp = std::ldexp(1.0, std::max(std::ilogb(w), -126) - 23);
    worst = std::max<int64_t>(worst, std::llround(std::fabs(g[i] - w) / ulp));
  }
  return worst;
}

}  // namespace rows_fixture
