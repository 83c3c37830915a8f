// Every operation of the public headers on every backend of this process against the CPU at one
// thread (as ggml's test-backend-ops): the CPU at the pool's thread count (ctest runs it with
// GIZML_THREADS=2; always bit-equal, docs/tensor.md), and the GPU when there is one (a real one,
// or the host emulator at the architecture GIZML_GPU_EMULATOR_ARCH names: ctest's emulator_*_ops
// entries run 8.0, 8.9 and 9.0) within each row's tolerance. The rows are in op_rows_*.cpp; the
// coverage test fails naming each operation of include/gizml/{tensor,netops,netops_rows}.h that
// has no row and is not excluded below with its reason.
#include <gizhw/gpu.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "core/thread_pool.h"
#include "ops/op_table.h"
#include "common/read_file.h"
#include "common/test_paths.h"

using namespace gizml;
using namespace gizml::test::ops;

namespace gizml::test::ops {

T::Tensor values(uint64_t seed, const T::Shape& shape, DType dtype) {
  std::vector<double> v = T::normal(T::Key(seed), shape, 0.0, 3.0).toDoubles();
  if (isFloat(dtype)) {
    const double specials[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0, 0.5, -2.5, 1.5};
    std::copy_n(specials, std::min(v.size(), std::size(specials)), v.begin());
  } else {
    for (double& x : v) x = std::nearbyint(x * 40.0 / 3.0 / 3.0);
  }
  return T::tensor(shape, v, DType::F64).cast(dtype);
}

T::Tensor finite(uint64_t seed, const T::Shape& shape, double std, DType dtype) {
  return T::normal(T::Key(seed), shape, 0.0, std).cast(DType::BF16).cast(dtype);
}

std::string label(DType dtype, const T::Shape& shape, const std::string& what) {
  return std::string(dtypeName(dtype)) + " " + T::shapeText(shape) + (what.empty() ? "" : " " + what);
}

void add(Outputs& out, std::string label, const std::function<T::Tensor()>& compute) {
  try {
    out.push_back({std::move(label), compute(), ""});
  } catch (const Error& e) {
    out.push_back({std::move(label), T::Tensor(), e.what()});
  }
}

}  // namespace gizml::test::ops

namespace {

std::vector<OpRow> allRows() {
  std::vector<OpRow> rows = tensorRows();
  for (OpRow& r : netopsRows()) rows.push_back(std::move(r));
  return rows;
}

// ---- comparing ---------------------------------------------------------------------------------

// The unit in the last place of |x| in a float dtype (its smallest normal's below that).
double ulpOf(double x, DType dtype) {
  const int mantissa = dtype == DType::F16 ? 10 : dtype == DType::BF16 ? 7 : dtype == DType::F64 ? 52 : 23;
  const int minExponent = dtype == DType::F16 ? -14 : dtype == DType::F64 ? -1022 : -126;
  const int e = x == 0 || !std::isfinite(x) ? minExponent : std::max(std::ilogb(x), minExponent);
  return std::ldexp(1.0, e - mantissa);
}

// Failures (at most 3 an output) of got against want within tol.
void compare(const Output& got, const Output& want, Tolerance tol, const std::string& where) {
  const std::string what = where + ", " + want.label;
  if (!want.error.empty() || !got.error.empty()) {
    EXPECT_EQ(got.error.empty(), want.error.empty())
        << what << ": "
        << (want.error.empty() ? "the reference ran, this backend threw: " + got.error
                               : "the reference threw (" + want.error + "), this backend did not");
    return;
  }
  T::Tensor g = got.value.host(), w = want.value;
  // A GPU kernel writing another dtype (BF16 rows, I8 codes): the host's result rounded once to it.
  if (g.dtype() != w.dtype() && got.value.onGpu()) w = w.cast(g.dtype());
  ASSERT_EQ(g.dtype(), w.dtype()) << what;
  ASSERT_EQ(g.shape(), w.shape()) << what;
  const auto a = g.toDoubles(), b = w.toDoubles();
  double largest = 0;
  for (double x : b)
    if (std::isfinite(x)) largest = std::max(largest, std::fabs(x));
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    bool same =
        std::bit_cast<uint64_t>(a[i]) == std::bit_cast<uint64_t>(b[i]) || (std::isnan(a[i]) && std::isnan(b[i]));
    if (!same && tol.ulps > 0 && isFloat(w.dtype()) && std::isfinite(a[i]) && std::isfinite(b[i])) {
      const double scale = tol.ofMax ? largest : std::max(std::fabs(b[i]), tol.floor);
      same = std::fabs(a[i] - b[i]) <= tol.ulps * ulpOf(scale, w.dtype());
    }
    if (!same && bad++ < 3)
      ADD_FAILURE() << what << ": element " << i << " is " << a[i] << ", the CPU at one thread gives " << b[i];
  }
}

struct Backend {
  std::string name;
  Place place;
};

std::vector<Backend> backends(std::optional<gizhw::gpu::Gpu>& gpu) {
  std::vector<Backend> list;
  const int threads = core::threadCount();
  if (threads > 1)
    list.push_back({"cpu at " + std::to_string(threads) + " threads", {[](const T::Tensor& t) { return t; }, false}});
  else
    std::printf("[ note ] the pool has one thread: the CPU is compared at one thread only (set GIZML_THREADS=2)\n");
  gpu = gizhw::gpu::open();
  if (gpu) {
    const auto& p = gpu->properties();
    list.push_back({gpu->describe() + " " + p.arch, {[&g = *gpu](const T::Tensor& t) { return t.on(g); }, true}});
  } else {
    std::printf("[ note ] no GPU (nor GIZML_GPU_EMULATOR=1): the CPU only\n");
  }
  return list;
}

// Each row (those byArchitecture only, with `architectureRowsOnly`) on every backend.
void runRows(bool architectureRowsOnly) {
  std::optional<gizhw::gpu::Gpu> gpu;
  const std::vector<Backend> list = backends(gpu);
  const Place cpu{[](const T::Tensor& t) { return t; }, false};
  for (const OpRow& row : allRows()) {
    if (architectureRowsOnly && !row.byArchitecture) continue;
    const std::string& name = row.covers.front();
    Outputs want;
    try {
      core::SingleThreadScope oneThread;
      row.run(cpu, want);
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << " on the CPU at one thread: " << e.what();
      continue;
    }
    EXPECT_TRUE(std::any_of(want.begin(), want.end(), [](const Output& o) { return o.error.empty(); }))
        << name << ": every case was rejected";
    for (const Backend& backend : list) {
      const bool gpuBackend = backend.place.gpu;
      Outputs got;
      try {
        row.run(backend.place, got);
      } catch (const std::exception& e) {
        ADD_FAILURE() << name << " on " << backend.name << ": " << e.what();
        continue;
      }
      ASSERT_EQ(got.size(), want.size()) << name << " on " << backend.name;
      for (size_t i = 0; i < got.size(); ++i)
        compare(got[i], want[i], gpuBackend ? row.gpu : kBits, name + " on " + backend.name);
    }
  }
}

}  // namespace

TEST(BackendOps, EveryRowMatchesTheCpuAtOneThread) { runRows(false); }

TEST(BackendOps, ArchitectureRowsMatchTheCpuAtOneThread) { runRows(true); }

// ---- coverage ------------------------------------------------------------------------------------

namespace {

// What the table leaves out, and why: no computation to compare between backends.
const std::map<std::string, std::string> kExcluded = {
    // Accessors and metadata.
    {"tensor::shapeText", "text of a shape"},
    {"tensor::opName", "an enum's name"},
    {"tensor::data", "a host address"},
    {"tensor::bytes", "storage size"},
    {"tensor::onGpu", "where the storage is"},
    {"tensor::gpu", "where the storage is"},
    {"tensor::deviceAddress", "a device address"},
    {"tensor::deviceText", "a device's name"},
    {"tensor::allocations", "an allocation counter"},
    {"tensor::liveBytes", "an allocation counter"},
    {"tensor::peakBytes", "an allocation counter"},
    {"tensor::resetPeak", "an allocation counter"},
    {"tensor::notOnHost", "the Error of data() on a GPU"},
    {"tensor::split", "derives a Key (host arithmetic)"},
    {"tensor::dtype", "an accessor"},
    {"tensor::shape", "an accessor"},
    {"tensor::strides", "an accessor"},
    {"tensor::offset", "an accessor"},
    {"tensor::ndim", "an accessor"},
    {"tensor::numel", "an accessor"},
    {"tensor::size", "an accessor"},
    {"tensor::isContiguous", "an accessor"},
    {"tensor::storage", "an accessor"},
    {"tensor::node", "an accessor"},
    {"tensor::device", "a device's name"},
    {"tensor::rawData", "a host address"},
    {"tensor::broadcastShapes", "shape arithmetic (tests/tensor)"},
    {"tensor::deferred", "the Lazy of a deferred product: netops::lazyConv's row runs it"},
    // Device moves and I/O: the means of the comparison itself.
    {"tensor::on", "the move to a backend"},
    {"tensor::host", "the move back"},
    {"tensor::text", "printing (tests/tensor)"},
    {"tensor::item", "reading values"},
    {"tensor::toDoubles", "reading values"},
    {"tensor::toFloats", "reading values"},
    {"tensor::toInts", "reading values"},
    // Creation: on the host only (no device argument); tests/tensor checks them against numpy.
    {"tensor::empty", "host creation"},
    {"tensor::tensor", "host creation"},
    {"tensor::zeros", "host creation"},
    {"tensor::ones", "host creation"},
    {"tensor::full", "host creation"},
    {"tensor::scalar", "host creation"},
    {"tensor::arange", "host creation"},
    {"tensor::linspace", "host creation"},
    {"tensor::uniform", "host creation"},
    {"tensor::normal", "host creation"},
    {"netops::causalMask", "host creation"},
    // GPU only (device addresses, no host function): tests/netops/rows_gpu_test.cpp checks them
    // against host computations.
    {"netops::argmaxInto", "GPU only"},
    {"netops::candidatesInto", "GPU only"},
    {"netops::splitSumInto", "GPU only"},
    {"netops::normRotateInto", "GPU only"},
    {"netops::siluMulRotatedInto", "GPU only"},
    {"netops::rowNormRopeInto", "GPU only"},
};

using testing_files::readFile;

// The functions and methods a header declares ("prefix::name"), and the members of its enum
// classes ("Enum::Member"); constructors (names of classes and structs) are left out.
std::set<std::string> declaredOperations(const std::string& path, const std::string& prefix) {
  std::string text = readFile(path);
  text = std::regex_replace(text, std::regex("//[^\n]*"), "");
  // A class's private part, up to the end of the class, is no public operation.
  for (size_t at; (at = text.find("private:")) != std::string::npos;)
    text.erase(at, text.find("\n};", at) - at);
  std::set<std::string> types, names;
  const std::regex typeName(R"((?:class|struct)\s+(\w+))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), typeName); it != std::sregex_iterator(); ++it)
    types.insert((*it)[1]);
  const std::regex enumBody(R"(enum class (\w+)[^{]*\{([^}]*)\})");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), enumBody); it != std::sregex_iterator(); ++it) {
    const std::string body = (*it)[2];
    const std::regex member(R"(\w+)");
    for (auto m = std::sregex_iterator(body.begin(), body.end(), member); m != std::sregex_iterator(); ++m)
      names.insert(std::string((*it)[1]) + "::" + m->str());
  }
  // A name after a type (`Tensor add(`, `void* data(`, `std::vector<Tensor> layerNorm(`), not a call
  // after `return`, not an operator.
  const std::regex declaration(R"(([\w>&*\]])\s+[&*]?(\w+)\s*\()");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), declaration); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[2];
    const size_t at = static_cast<size_t>(it->position(0));
    const bool afterReturn = at >= 5 && text.compare(at - 5, 6, "return") == 0;
    if (afterReturn || types.count(name) || name == "operator" || name == "noreturn") continue;
    names.insert(prefix + name);
  }
  return names;
}

}  // namespace

TEST(BackendOps, EveryPublicOperationHasARow) {
  const std::string include = test_paths::testData() + "/../../include/gizml/";
  std::set<std::string> declared = declaredOperations(include + "tensor.h", "tensor::");
  for (const std::string& n : declaredOperations(include + "ops.h", "tensor::")) declared.insert(n);  // opName
  for (const char* header : {"netops.h", "netops_rows.h"})
    for (const std::string& n : declaredOperations(include + header, "netops::")) declared.insert(n);
  ASSERT_GT(declared.size(), 100u) << "the header parser found too little";
  std::set<std::string> covered;
  for (const OpRow& row : allRows()) covered.insert(row.covers.begin(), row.covers.end());
  for (const std::string& name : declared)
    EXPECT_TRUE(covered.count(name) || kExcluded.count(name))
        << name << " is declared in a public header but has no row in tests/ops/op_rows_*.cpp (nor an exclusion)";
  for (const std::string& name : covered)
    EXPECT_TRUE(declared.count(name)) << "a row covers " << name << ", which no public header declares";
  for (const auto& [name, why] : kExcluded) {
    EXPECT_TRUE(declared.count(name)) << "excluded " << name << " (" << why << ") is not declared any more";
    EXPECT_FALSE(covered.count(name)) << name << " is both excluded and covered by a row";
  }
}
