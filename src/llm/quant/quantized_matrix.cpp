// QuantizedMatrix (gizml/group_quant.h): cpu::QuantMatrix over rows of the group format, and its
// product with f32 activations quantized to int8 as a linear layer's are (llm/ops/linear.cpp).
#include <gizml/error.h>
#include <gizml/group_quant.h>

#include <array>

#include "cpu/quant_dot.h"
#include "cpu/quant_panels.h"
#include "llm/quant/group_quant.h"

namespace gizml::llm {

QuantizedMatrix::QuantizedMatrix(const GroupFormat& f, float base, const uint8_t* data, int64_t rows, int64_t cols) {
  checkGroupFormat(f, "QuantizedMatrix");
  std::array<float, 256> scales;  // the scale of each exponent code (the matrix keeps a copy)
  for (int e = 0; e < 256; ++e) scales[static_cast<size_t>(e)] = groupScale(base, e);
  matrix_ = std::make_unique<const cpu::QuantMatrix>(
      cpu::QuantWeights{data, rows, cols, groupRowBytes(f, cols), f.bits, f.group, scales.data()});
}

QuantizedMatrix::QuantizedMatrix(QuantizedMatrix&&) noexcept = default;
QuantizedMatrix& QuantizedMatrix::operator=(QuantizedMatrix&&) noexcept = default;
QuantizedMatrix::~QuantizedMatrix() = default;

int64_t QuantizedMatrix::rows() const { return matrix_->rows(); }
int64_t QuantizedMatrix::cols() const { return matrix_->cols(); }

void QuantizedMatrix::matmul(const float* x, int64_t n, float* y) const {
  // The activations' int8 codes are rebuilt per call; the storage is reused across calls.
  thread_local cpu::QuantActs acts;
  cpu::quantizeActs(x, n, matrix_->cols(), matrix_->group(), acts);
  matrix_->matmul(acts, y);
}

}  // namespace gizml::llm
