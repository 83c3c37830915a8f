#pragma once
// The table of operations that tests/ops/backend_ops_test.cpp runs on every backend against the
// CPU at one thread (as ggml's test-backend-ops does). A row builds its inputs on the host, moves
// them to the backend with `place` (views are taken after the move, so a GPU reads them strided),
// and appends its results. To add an operation: add a row to op_rows_tensor.cpp or
// op_rows_netops.cpp naming the header's operation(s) it covers.
#include <gizml/tensor.h>

#include <functional>
#include <string>
#include <vector>

namespace gizml::test::ops {

/// How close a GPU result must be to the CPU's (the CPU at any thread count is always bit-equal).
/// ulps 0: the same bits (NaN equal to NaN, -0 not +0). Else |gpu - cpu| <= ulps units in the last
/// place of the result's dtype at max(|cpu|, floor), or, with ofMax, at the largest |cpu| of the
/// output (for results whose errors scale with the whole row, as attention's do).
struct Tolerance {
  int ulps = 0;
  double floor = 0;
  bool ofMax = false;
};
inline constexpr Tolerance kBits{};
inline constexpr Tolerance ulps(int n, double floor = 0) { return {n, floor, false}; }
inline constexpr Tolerance ulpsOfMax(int n) { return {n, 0, true}; }

/// Moves a host tensor to the backend under test (the identity on the CPU).
struct Place {
  std::function<T::Tensor(const T::Tensor&)> move;
  bool gpu = false;  // for operations whose GPU kernels take other dtypes (BF16) than the host's
  T::Tensor operator()(const T::Tensor& t) const { return move(t); }
};

struct Output {
  std::string label;  // which case of the row ("f16 [5, 7] transposed")
  T::Tensor value;
  std::string error;  // the Error's text where the case was rejected (then every backend must reject it)
};
using Outputs = std::vector<Output>;

/// Runs one case of a row into out: its result, or the gizml::Error it threw.
void add(Outputs& out, std::string label, const std::function<T::Tensor()>& compute);

struct OpRow {
  /// The operations of the public headers the row runs: "tensor::add", "UnaryOp::Ceil",
  /// "netops::attention" (the coverage check's names; the first also names the row).
  std::vector<std::string> covers;
  Tolerance gpu = kBits;
  std::function<void(const Place&, Outputs&)> run;
  /// Whether its GPU kernels take other paths by compute capability (tensor cores, sm_80+): the
  /// rows ctest runs again on the emulator at 8.0 and 9.0 (the full table runs at 8.9).
  bool byArchitecture = false;
};

std::vector<OpRow> tensorRows();
std::vector<OpRow> netopsRows();

/// Deterministic inputs: normal values times 3 in float dtypes with NaN, +-inf, -0, 0 and halves
/// first; whole normal numbers (std 13) in integer dtypes, saturated to the dtype; Bool x != 0.
T::Tensor values(uint64_t seed, const T::Shape& shape, DType dtype = DType::F32);
/// Finite normal values (mean 0, std) rounded to BF16 (exact in every float dtype and on every
/// backend's BF16 path), held as `dtype`.
T::Tensor finite(uint64_t seed, const T::Shape& shape, double std = 1.0, DType dtype = DType::F32);

/// "f32 [5, 7]".
std::string label(DType dtype, const T::Shape& shape, const std::string& what = "");

}  // namespace gizml::test::ops
