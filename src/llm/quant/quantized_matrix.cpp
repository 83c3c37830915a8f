// QuantizedMatrix (gizml/group_quant.h): cpu::QuantMatrix over rows of the group format, and its
// product with f32 activations quantized to int8 as a linear layer's are (llm/ops/linear.cpp).
#include <gizml/error.h>
#include <gizml/group_quant.h>

#include <array>
#include <vector>

#include "cpu/quant_dot.h"
#include "cpu/quant_panels.h"
#include "llm/quant/group_quant.h"

namespace gizml::llm {

struct QuantizedMatrix::Kernel : cpu::QuantMatrix {
  using cpu::QuantMatrix::QuantMatrix;
};

namespace {
// The activations' int8 codes are rebuilt per call; the storage is reused across calls.
thread_local cpu::QuantActs acts;
}  // namespace

QuantizedMatrix::QuantizedMatrix(const GroupFormat& f, float base, const uint8_t* data, int64_t rows, int64_t cols) {
  checkGroupFormat(f, "QuantizedMatrix");
  std::array<float, 256> scales;  // the scale of each exponent code (the matrix keeps a copy)
  for (int e = 0; e < 256; ++e) scales[static_cast<size_t>(e)] = groupScale(base, e);
  kernel_ = std::make_unique<const Kernel>(
      cpu::QuantWeights{data, rows, cols, groupRowBytes(f, cols), f.bits, f.group, scales.data()});
}

QuantizedMatrix::QuantizedMatrix(QuantizedMatrix&&) noexcept = default;
QuantizedMatrix& QuantizedMatrix::operator=(QuantizedMatrix&&) noexcept = default;
QuantizedMatrix::~QuantizedMatrix() = default;

int64_t QuantizedMatrix::rows() const { return kernel_->rows(); }
int64_t QuantizedMatrix::cols() const { return kernel_->cols(); }
bool QuantizedMatrix::readsSource() const { return !kernel_->packed(); }

void QuantizedMatrix::matmul(const float* x, int64_t n, float* y) const {
  cpu::quantizeActs(x, n, kernel_->cols(), kernel_->group(), acts);
  kernel_->matmul(acts, y);
}

void matmulAll(const std::vector<const QuantizedMatrix*>& matrices, const float* x, int64_t n,
               const std::vector<float*>& ys) {
  check(matrices.size() == ys.size(), "matmulAll: one output per matrix");
  if (matrices.empty()) return;
  thread_local std::vector<const cpu::QuantMatrix*> kernels;  // kept: a decode step makes ~120 products
  kernels.clear();
  for (const QuantizedMatrix* m : matrices) kernels.push_back(m->kernel_.get());
  // The first matrix's columns and group; cpu::matmulAll checks that the others have them.
  cpu::quantizeActs(x, n, kernels[0]->cols(), kernels[0]->group(), acts);
  cpu::matmulAll(kernels, acts, ys);
}

}  // namespace gizml::llm
