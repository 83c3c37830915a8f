// gizml::tensor against numpy: golden fixtures from tests/reference/make_tensor_fixtures.py
// (tests/data/tensor/ops.bin; its format is documented at the top of that script). Every case
// builds its inputs (and the recorded views of them), runs the op through the public API and
// compares with numpy's result under gizml's type rules.
//
// Comparison modes (attribute "mode" of a case):
//   0 exact: bit-equal; any NaN equals any NaN. Used for add/sub/mul/div/sqrt/neg/abs/floor/ceil/
//     round/sign/relu/min/max/mod/comparisons/where/casts/integer ops/concat/stack/gather/
//     indexSelect/argmax/argmin/max/min reductions and integer sums/prods/means/cumsums/matmuls.
//   1 ulp: the distance to numpy's correctly rounded value (f64 result rounded once to the result
//     dtype), in ulps of the result dtype (F16/BF16 results count F16/BF16 ulps). NaN must be
//     NaN, infinities equal. A reference in the subnormal range (|ref| < FLT_MIN) may be flushed:
//     there an absolute error of FLT_MIN is allowed (exp and sigmoid saturate to 0 below
//     ln(FLT_MIN); documented in src/cpu/elementwise_simd.cpp).
//     gelutanh's bound adds the condition allowance "cond" below.
//   2 sum-like (float sums/means/variance/prod/softmax/logSoftmax/cumsum/matmul, whose order of
//     additions differs from numpy's): |got - exact| <= scale * (n + c) * 2^-24 + (one ulp of
//     the result dtype if it is F16/BF16, whose final rounding is coarser than 2^-24). n = the
//     number of terms; c = a small per-op constant for the elementwise parts and the final
//     rounding; scale = the sum of |terms| for each element: sum |x| (sum), mean |x| (mean), the
//     variance (var), |prod| (prod), sum_k |a_ik b_kj| (matmul), the running sum |x| (cumsum),
//     |y| (1 + |x - max| / n) (softmax: x - max is rounded in f32, which moves exp(x - max) by
//     |x - max| 2^-24 relatively), |x - max| + |log sum| + 1 (logSoftmax).
//
// Bounds, and what was measured with them (g++ 12 -O3, glibc; Highway's AVX2 target, and the
// same numbers on SSE4/SSSE3/EMU128 forced with hwy::SetSupportedTargetsForTest except where
// noted). Run with GIZML_REFERENCE_STATS=1 to print the measured table.
//
//   mode 1       bound (ulp)            measured max ulp, F32 / F16 / BF16 results
//   exp          2                      1 / 0 / 0   (+1 element flushed: exp(-100), subnormal)
//   log          2                      1 / 0 / 0
//   rsqrt        2                      1 / 0 / 0   (1 / sqrt: two roundings)
//   sin, cos     2                      1 / 0 / 0   (|x| > 39000 goes to libm)
//   tanh         3                      2 / 0 / 0
//   sigmoid      3                      2 / 0 / 0
//   silu         3                      2 / 0 / 0
//   gelu (erf)   1                      0 / 0 / 0   (erfc evaluated in double)
//   gelu (tanh)  4 + cond               61 (1 beyond cond; SSE4: 69, 1 beyond) / 0 / 0
//   pow          1                      1 / 0 / 0   (libm powf)
//   "cond" = ceil(|x f'(x) / f(x)|) f32 ulps (scaled to F16/BF16 ulps): the cubic u is rounded
//   in f32 and x sigmoid(2u) amplifies its relative error by up to that much (~60 at x = -10).
//
//   mode 2       c    measured max |err| / (scale n 2^-24), F32   max |err| / tolerance, F32 / F16 / BF16
//   sum          1    0.16                                         0.14 / 0.44 / 0.50
//   mean         2    0.23                                         0.18 / 0.50 / 0.46
//   var          4    0.37                                         0.24 / 0.48 / 0.42
//   prod         2    0.51                                         0.40 / 0.45 / 0.40
//   softmax      4    0.69                                         0.48 / 0.49 / 0.49
//   logsoftmax   4    0.23                                         0.13 / 0.49 / 0.50
//   cumsum       1    0.23                                         0.19 / 0.50 / 0.50
//   matmul       1    0.29                                         0.25 / 0.49 / 0.49
//   (F16/BF16 results use about half their tolerance: the final rounding, half an ulp of the
//   one ulp allowed.)
//
#include <gizml/tensor.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include "common/fixture_file.h"

#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>
#include "common/test_paths.h"

namespace {

using namespace gizml;
using namespace gizml::tensor;

using namespace fixture;

const std::string kFixturePath = test_paths::testData() + "/tensor/ops.bin";

struct Fixtures {
  std::vector<Case> cases;
  std::string error;
};

const Fixtures& fixtures() {
  static const Fixtures f = [] {
    Fixtures out;
    try {
      out.cases = loadFixtures(kFixturePath);
    } catch (const std::exception& e) {
      out.error = e.what();
    }
    return out;
  }();
  return f;
}

// ---------------------------------------------------------------------------------------------
// Values.

uint32_t f32Bits(float f) { return std::bit_cast<uint32_t>(f); }

double decode(uint8_t code, const uint8_t* data, int64_t i) {
  switch (code) {
    case kF64: { double v; std::memcpy(&v, data + i * 8, 8); return v; }
    case 0: { float v; std::memcpy(&v, data + i * 4, 4); return v; }
    case 1: { uint16_t h; std::memcpy(&h, data + i * 2, 2); return halfToFloat(h); }
    case 2: { uint16_t h; std::memcpy(&h, data + i * 2, 2); return bf16ToFloat(h); }
    case 3: return static_cast<int8_t>(data[i]);
    case 4: return data[i];
    case 5: { int32_t v; std::memcpy(&v, data + i * 4, 4); return v; }
    case 6: { int64_t v; std::memcpy(&v, data + i * 8, 8); return static_cast<double>(v); }
    case 7: return data[i] ? 1.0 : 0.0;
  }
  throw std::runtime_error("decode: dtype " + std::to_string(code));
}

std::string show(uint8_t code, const uint8_t* data, int64_t i) {
  std::ostringstream s;
  if (code == 6) {
    int64_t v;
    std::memcpy(&v, data + i * 8, 8);
    s << v;
  } else {
    s.precision(9);
    s << decode(code, data, i);
  }
  return s.str();
}

// The position of a float dtype's bit pattern on the number line, in ulps (+0 and -0 are one
// point apart, which never matters here: exact mode compares bits).
int64_t ordinal(DType t, double v) {
  if (t == DType::F32) {
    const uint32_t u = f32Bits(static_cast<float>(v));
    return (u & 0x80000000u) ? -static_cast<int64_t>(u & 0x7fffffffu) : static_cast<int64_t>(u);
  }
  const uint16_t h = t == DType::F16 ? floatToHalf(static_cast<float>(v)) : floatToBf16(static_cast<float>(v));
  return (h & 0x8000u) ? -static_cast<int64_t>(h & 0x7fffu) : static_cast<int64_t>(h);
}

// One ulp of dtype t at magnitude |v|.
double ulpAt(DType t, double v) {
  const int bits = t == DType::F32 ? 24 : t == DType::F16 ? 11 : 8;
  const int minExp = t == DType::F16 ? -14 : -126;
  const double a = std::fabs(v);
  const int e = a > 0 ? std::max(static_cast<int>(std::floor(std::log2(a))), minExp) : minExp;
  return std::ldexp(1.0, e - bits + 1);
}

// ---------------------------------------------------------------------------------------------
// Per-op bounds (see the table at the top).

int ulpBound(const std::string& op) {
  static const std::map<std::string, int> bounds = {
      {"unary.exp", 2},     {"unary.log", 2},  {"unary.rsqrt", 2},    {"unary.sin", 2},
      {"unary.cos", 2},     {"unary.tanh", 3}, {"unary.sigmoid", 3},  {"unary.silu", 3},
      {"unary.gelu", 1},    {"unary.gelutanh", 4}, {"binary.pow", 1},
  };
  auto it = bounds.find(op);
  if (it == bounds.end()) throw std::runtime_error("no ulp bound for " + op);
  return it->second;
}

double sumConstant(const std::string& op) {
  static const std::map<std::string, double> constants = {
      {"reduce.sum", 1},  {"reduce.mean", 2}, {"reduce.var", 4},   {"reduce.prod", 2}, {"softmax", 4},
      {"logsoftmax", 4},  {"cumsum", 1},      {"matmul", 1},
  };
  auto it = constants.find(op);
  if (it == constants.end()) throw std::runtime_error("no tolerance constant for " + op);
  return it->second;
}

// Measured maxima per op and result dtype, printed at exit with GIZML_REFERENCE_STATS=1.
struct Stat {
  int64_t maxUlp = 0;
  double maxRatio = 0.0;
  int64_t cases = 0;
  int64_t flushed = 0;  // mode 1 elements that passed by the subnormal rule
  int64_t maxBeyondCond = INT64_MIN;  // mode 1: max of ulps - the condition allowance
  double maxTolUsed = 0.0;  // mode 2: max of |error| / tolerance
};
std::map<std::string, Stat>& stats() {
  static std::map<std::string, Stat> s;
  return s;
}

class StatsPrinter : public ::testing::Environment {
 public:
  void TearDown() override {
    if (!std::getenv("GIZML_REFERENCE_STATS")) return;
    std::cout << "\nmeasured errors (op/result dtype: cases, max ulp[, max ulp beyond the condition allowance]"
                 "[, max |err| / (scale n 2^-24), max |err| / tolerance][, elements flushed])\n";
    for (const auto& [key, s] : stats()) {
      std::cout << "  " << key << ": " << s.cases << " cases, " << s.maxUlp << " ulp";
      if (s.maxBeyondCond != INT64_MIN && s.maxBeyondCond != s.maxUlp) std::cout << " (" << s.maxBeyondCond << " beyond cond)";
      if (s.maxRatio > 0 || s.maxTolUsed > 0)
        std::cout << ", ratio " << s.maxRatio << ", tolerance used " << s.maxTolUsed;
      if (s.flushed) std::cout << ", flushed " << s.flushed;
      std::cout << "\n";
    }
  }
};
[[maybe_unused]] ::testing::Environment* const kStatsEnv = ::testing::AddGlobalTestEnvironment(new StatsPrinter);

// ---------------------------------------------------------------------------------------------
// Running a case.

Tensor makeTensor(const Array& a) {
  if (a.dtype > static_cast<uint8_t>(DType::Bool)) throw std::runtime_error(a.name + " is not a gizml dtype");
  Tensor t = empty(a.shape, static_cast<DType>(a.dtype));
  if (!a.data.empty()) std::memcpy(t.rawData(), a.data.data(), a.data.size());
  return t;
}

Tensor applyView(Tensor t, const std::vector<int64_t>& recipe) {
  size_t i = 0;
  while (i < recipe.size()) {
    if (i + 2 > recipe.size()) throw std::runtime_error("view recipe truncated");
    const int64_t kind = recipe[i], argc = recipe[i + 1];
    if (argc < 0 || i + 2 + static_cast<size_t>(argc) > recipe.size()) throw std::runtime_error("view recipe truncated");
    const std::vector<int64_t> args(recipe.begin() + static_cast<std::ptrdiff_t>(i + 2),
                                    recipe.begin() + static_cast<std::ptrdiff_t>(i + 2 + argc));
    i += 2 + static_cast<size_t>(argc);
    switch (kind) {
      case 1: t = t.transpose(args.at(0), args.at(1)); break;
      case 2: t = t.slice(args.at(0), args.at(1), args.at(2), args.at(3)); break;
      case 3: t = t.expand(Shape(args.begin(), args.end())); break;
      case 4: t = t.permute(Axes(args.begin(), args.end())); break;
      default: throw std::runtime_error("unknown view kind " + std::to_string(kind));
    }
  }
  return t;
}

Tensor input(const Case& c, const std::string& name) {
  Tensor t = makeTensor(c.array(name));
  if (c.has("view." + name)) t = applyView(t, c.list("view." + name));
  return t;
}

using UnaryMethod = Tensor (Tensor::*)() const;
using BinaryMethod = Tensor (Tensor::*)(const Tensor&) const;

Tensor run(const Case& c) {
  const std::string& op = c.op;
  if (op.rfind("unary.", 0) == 0) {
    static const std::map<std::string, UnaryMethod> methods = {
        {"neg", &Tensor::neg},         {"abs", &Tensor::abs},       {"exp", &Tensor::exp},
        {"log", &Tensor::log},         {"sqrt", &Tensor::sqrt},     {"rsqrt", &Tensor::rsqrt},
        {"sin", &Tensor::sin},         {"cos", &Tensor::cos},       {"tanh", &Tensor::tanh},
        {"sigmoid", &Tensor::sigmoid}, {"relu", &Tensor::relu},     {"silu", &Tensor::silu},
        {"gelu", &Tensor::gelu},       {"gelutanh", &Tensor::geluTanh}, {"floor", &Tensor::floor},
        {"ceil", &Tensor::ceil},       {"round", &Tensor::round},   {"sign", &Tensor::sign},
    };
    return (input(c, "x").*methods.at(op.substr(6)))();
  }
  if (op.rfind("binary.", 0) == 0) {
    static const std::map<std::string, BinaryMethod> methods = {
        {"add", &Tensor::add}, {"sub", &Tensor::sub}, {"mul", &Tensor::mul}, {"div", &Tensor::div},
        {"pow", &Tensor::pow}, {"min", &Tensor::min}, {"max", &Tensor::max}, {"mod", &Tensor::mod},
        {"eq", &Tensor::eq},   {"ne", &Tensor::ne},   {"lt", &Tensor::lt},   {"le", &Tensor::le},
        {"gt", &Tensor::gt},   {"ge", &Tensor::ge},
    };
    return (input(c, "a").*methods.at(op.substr(7)))(input(c, "b"));
  }
  if (op == "where") return where(input(c, "c"), input(c, "a"), input(c, "b"));
  if (op == "cast") return input(c, "x").cast(static_cast<DType>(c.attr("dtype")));
  if (op.rfind("reduce.", 0) == 0) {
    const Tensor x = input(c, "x");
    const std::vector<int64_t>& axesList = c.list("axes");
    const Axes axes(axesList.begin(), axesList.end());
    const bool keep = c.attr("keepdim") != 0;
    const std::string r = op.substr(7);
    if (r == "sum") return x.sum(axes, keep);
    if (r == "mean") return x.mean(axes, keep);
    if (r == "max") return x.max(axes, keep);
    if (r == "min") return x.min(axes, keep);
    if (r == "prod") return x.prod(axes, keep);
    if (r == "var") return x.variance(axes, keep, c.attr("ddof"));
  }
  if (op == "argmax") return input(c, "x").argmax(c.attr("axis"), c.attr("keepdim") != 0);
  if (op == "argmin") return input(c, "x").argmin(c.attr("axis"), c.attr("keepdim") != 0);
  if (op == "softmax") return input(c, "x").softmax(c.attr("axis"));
  if (op == "logsoftmax") return input(c, "x").logSoftmax(c.attr("axis"));
  if (op == "cumsum") return input(c, "x").cumsum(c.attr("axis"));
  if (op == "matmul") return input(c, "a").matmul(input(c, "b"));
  if (op == "concat" || op == "stack") {
    std::vector<Tensor> parts;
    for (int i = 0; c.find("t" + std::to_string(i)); ++i) parts.push_back(input(c, "t" + std::to_string(i)));
    return op == "concat" ? concat(parts, c.attr("axis")) : stack(parts, c.attr("axis"));
  }
  if (op == "gather") return gather(input(c, "x"), c.attr("axis"), input(c, "idx"));
  if (op == "indexselect") return input(c, "x").indexSelect(c.attr("axis"), input(c, "idx"));
  throw std::runtime_error("unknown op " + op);
}

// The raw bytes of t in row-major order.
std::vector<uint8_t> rawBytes(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.rawData());
  return std::vector<uint8_t>(p, p + c.numel() * static_cast<int64_t>(dtypeSize(c.dtype())));
}

std::string indexText(const Shape& shape, int64_t flat) {
  Shape idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return shapeText(idx);
}

class Reference : public ::testing::TestWithParam<size_t> {};

TEST_P(Reference, MatchesNumpy) {
  const Fixtures& f = fixtures();
  ASSERT_TRUE(f.error.empty()) << f.error;
  const Case& c = f.cases.at(GetParam());
  SCOPED_TRACE(c.name);
  Tensor got;
  try {
    got = run(c);
  } catch (const std::exception& e) {
    FAIL() << c.name << ": " << c.op << " threw: " << e.what();
  }
  const Array& expected = c.array("out");
  const int64_t mode = c.attr("mode");
  const auto rdtype = static_cast<DType>(c.attr("rdtype"));
  ASSERT_EQ(dtypeName(got.dtype()), std::string(dtypeName(rdtype))) << "result dtype";
  ASSERT_EQ(shapeText(got.shape()), shapeText(expected.shape)) << "result shape";
  const std::vector<uint8_t> bytes = rawBytes(got);
  const uint8_t gotCode = static_cast<uint8_t>(got.dtype());
  const int64_t n = expected.numel();
  const std::string statKey = c.op + "/" + dtypeName(rdtype);
  Stat& stat = stats()[statKey];
  ++stat.cases;

  int64_t failures = 0;
  std::ostringstream report;
  auto fail = [&](int64_t i, const std::string& why) {
    if (failures++ < 8)
      report << "  at " << indexText(expected.shape, i) << ": got " << show(gotCode, bytes.data(), i) << ", expected "
             << show(expected.dtype, expected.data.data(), i) << " " << why << "\n";
  };
  // NaN must meet NaN and infinity the same infinity; true when either value is not finite.
  auto nonFinite = [&](int64_t i, double g, double e) {
    if (std::isnan(e) || std::isnan(g)) {
      if (std::isnan(e) != std::isnan(g)) fail(i, "(NaN mismatch)");
      return true;
    }
    if (std::isinf(e) || std::isinf(g)) {
      if (g != e) fail(i, "(infinity mismatch)");
      return true;
    }
    return false;
  };

  if (mode == 0) {
    ASSERT_EQ(expected.dtype, gotCode);
    const size_t size = dtypeSize(rdtype);
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* g = bytes.data() + i * static_cast<int64_t>(size);
      const uint8_t* e = expected.data.data() + i * static_cast<int64_t>(size);
      if (std::memcmp(g, e, size) == 0) continue;
      if (isFloat(rdtype) && std::isnan(decode(gotCode, bytes.data(), i)) &&
          std::isnan(decode(expected.dtype, expected.data.data(), i)))
        continue;
      fail(i, "(bits differ)");
    }
  } else if (mode == 1) {
    ASSERT_EQ(expected.dtype, gotCode);
    ASSERT_TRUE(isFloat(rdtype));
    const int bound = ulpBound(c.op);
    const Array* cond = c.find("cond");
    if (cond) {
      ASSERT_EQ(cond->numel(), n);
    }
    const int precision = rdtype == DType::F32 ? 24 : rdtype == DType::F16 ? 11 : 8;
    for (int64_t i = 0; i < n; ++i) {
      const double g = decode(gotCode, bytes.data(), i), e = decode(expected.dtype, expected.data.data(), i);
      // Rounding an inner argument costs up to cond f32 ulps (fewer ulps of F16/BF16).
      const int64_t allowance =
          cond ? static_cast<int64_t>(std::ceil(decode(kF64, cond->data.data(), i) * std::ldexp(1.0, precision - 24)))
               : 0;
      if (nonFinite(i, g, e)) continue;
      const int64_t ulps = std::abs(ordinal(rdtype, g) - ordinal(rdtype, e));
      if (std::fabs(e) < FLT_MIN && std::fabs(g - e) <= FLT_MIN) {
        if (ulps > bound + allowance) ++stat.flushed;
        continue;
      }
      stat.maxUlp = std::max(stat.maxUlp, ulps);
      stat.maxBeyondCond = std::max(stat.maxBeyondCond, ulps - allowance);
      if (ulps > bound + allowance)
        fail(i, "(" + std::to_string(ulps) + " ulp > " + std::to_string(bound) + " + " + std::to_string(allowance) + ")");
    }
  } else {
    ASSERT_EQ(expected.dtype, kF64);
    const Array& scale = c.array("scale");
    ASSERT_EQ(scale.numel(), n);
    const double terms = static_cast<double>(c.attr("terms"));
    const double constant = sumConstant(c.op);
    for (int64_t i = 0; i < n; ++i) {
      const double g = decode(gotCode, bytes.data(), i), e = decode(kF64, expected.data.data(), i);
      const double s = decode(kF64, scale.data.data(), i);
      if (nonFinite(i, g, e)) continue;
      const double err = std::fabs(g - e);
      const double budget = s * terms * 0x1p-24;
      const double tol = s * (terms + constant) * 0x1p-24 + (rdtype == DType::F32 ? 0.0 : ulpAt(rdtype, e));
      if (budget > 0) stat.maxRatio = std::max(stat.maxRatio, err / budget);
      if (tol > 0) stat.maxTolUsed = std::max(stat.maxTolUsed, err / tol);
      if (std::isfinite(static_cast<float>(e)))
        stat.maxUlp = std::max(stat.maxUlp, std::abs(ordinal(rdtype, g) - ordinal(rdtype, e)));
      if (err > tol) {
        std::ostringstream why;
        why.precision(17);
        why << "(exact " << e << ", error " << err << " > tolerance " << tol << ")";
        fail(i, why.str());
      }
    }
  }
  EXPECT_EQ(failures, 0) << c.name << " (" << c.op << ", mode " << mode << "): " << failures << " of " << n
                         << " elements differ\n"
                         << report.str();
}

std::vector<size_t> caseIndices() {
  std::vector<size_t> v(std::max<size_t>(fixtures().cases.size(), 1));  // one to report a load error
  for (size_t i = 0; i < v.size(); ++i) v[i] = i;
  return v;
}

std::string caseTestName(const ::testing::TestParamInfo<size_t>& info) {
  const Fixtures& f = fixtures();
  if (info.param >= f.cases.size()) return "LoadError";
  std::string s = f.cases[info.param].name;
  for (char& ch : s) {
    if (ch == '-') ch = 'm';
    else if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return s;
}

INSTANTIATE_TEST_SUITE_P(Numpy, Reference, ::testing::ValuesIn(caseIndices()), caseTestName);

TEST(ReferenceFixtures, LoadAndCoverEveryOp) {
  const Fixtures& f = fixtures();
  ASSERT_TRUE(f.error.empty()) << f.error;
  EXPECT_GT(f.cases.size(), 400u);
  std::map<std::string, int> ops;
  for (const Case& c : f.cases) ++ops[c.op];
  for (const char* op : {"unary.neg", "unary.abs", "unary.exp", "unary.log", "unary.sqrt", "unary.rsqrt", "unary.sin",
                         "unary.cos", "unary.tanh", "unary.sigmoid", "unary.relu", "unary.silu", "unary.gelu",
                         "unary.gelutanh", "unary.floor", "unary.ceil", "unary.round", "unary.sign", "binary.add",
                         "binary.sub", "binary.mul", "binary.div", "binary.pow", "binary.min", "binary.max",
                         "binary.mod", "binary.eq", "binary.ne", "binary.lt", "binary.le", "binary.gt", "binary.ge",
                         "where", "cast", "reduce.sum", "reduce.mean", "reduce.max", "reduce.min", "reduce.prod",
                         "reduce.var", "argmax", "argmin", "softmax", "logsoftmax", "matmul", "concat", "stack",
                         "gather", "indexselect", "cumsum"})
    EXPECT_GT(ops[op], 0) << "no fixture for " << op;
}

TEST(ReferenceFixtures, ParserRejectsDamage) {
  std::ifstream in(kFixturePath, std::ios::binary);
  ASSERT_TRUE(in) << kFixturePath;
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 64u);
  for (size_t cut : {size_t{3}, size_t{11}, bytes.size() / 2, bytes.size() - 1}) {
    std::vector<uint8_t> truncated(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_THROW(parseFixtures(truncated), std::runtime_error) << "cut at " << cut;
  }
  std::vector<uint8_t> bad = bytes;
  bad[0] = 'X';
  EXPECT_THROW(parseFixtures(bad), std::runtime_error);
  bytes.push_back(0);
  EXPECT_THROW(parseFixtures(bytes), std::runtime_error);
}

}  // namespace
