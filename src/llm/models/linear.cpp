#include "llm/models/linear.h"

#include <gizml/error.h>

#include <algorithm>
#include <array>

#include "core/thread_pool.h"
#include "cpu/convert.h"
#include "cpu/gemm.h"
#include "llm/models/weights.h"
#include "llm/quant/converted_model.h"

namespace gizml::llm {
namespace {

// Passes of up to this many rows (decode steps) take the panel kernel, one panel a task; more go
// through sgemm, kSgemmPanels panels a block.
constexpr int64_t kFewRows = 4;
constexpr int64_t kSgemmPanels = 4;

}  // namespace

Linear::Linear(const ConvertedModel& weights, const std::string& name, int64_t out, int64_t in,
               const std::string& bias, Use use)
    : out_(out), in_(in) {
  const StoredTensor& t = storedTensor(weights, name, {out, in});
  data_ = weights.raw(t).data();
  quantized_ = t.quantized;
  dtype_ = t.dtype;
  if (quantized_) {
    format_ = t.format;
    rowBytes_ = groupRowBytes(format_, in);
    scaleBase_ = t.scaleBase;
    if (use == Use::Multiply) {
      std::array<float, 256> scales;  // the scale of each exponent code
      for (int e = 0; e < 256; ++e) scales[static_cast<size_t>(e)] = groupScale(t.scaleBase, e);
      matrix_ = std::make_shared<const cpu::QuantMatrix>(
          cpu::QuantWeights{data_, out_, in_, rowBytes_, format_.bits, format_.group, scales.data()});
      // The panels are a copy: the mapped bytes are only read again for rows (a tied embedding).
      if (matrix_->packed()) weights.releasePages(t);
    }
  } else if (use == Use::Multiply) {
    panels_ = std::make_shared<const core::PageVector<uint8_t>>(cpu::packFloatPanels(dtype_, data_, out_, in_));
    weights.releasePages(t);
  }
  if (!bias.empty()) bias_ = loadVector(weights, bias, out);
}

void Linear::decodeRows(int64_t first, int64_t count, float* dst) const {
  if (quantized_) dequantizeGroups(format_, scaleBase_, data_ + first * rowBytes_, count, in_, dst);
  else cpu::loadF32(dtype_, data_ + first * in_ * static_cast<int64_t>(dtypeSize(dtype_)), 1, count * in_, dst);
}

void Linear::row(int64_t r, float* dst) const { decodeRows(r, 1, dst); }

void Linear::addBias(float* y, int64_t rows, int64_t first, int64_t count) const {
  if (bias_.empty()) return;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = first; o < first + count; ++o) y[r * out_ + o] += bias_[static_cast<size_t>(o)];
}

void Linear::applyQuantized(const float* x, int64_t rows, float* y) const {
  // The activations' int8 codes are rebuilt per call; the storage is reused across calls.
  check(matrix_ != nullptr, "Linear: this layer was made to read rows, not to multiply");
  thread_local cpu::QuantActs acts;
  cpu::quantizeActs(x, rows, in_, format_.group, acts);
  matrix_->matmul(acts, y);
  addBias(y, rows, 0, out_);
}

void Linear::applyAll(const std::vector<const Linear*>& layers, const float* x, int64_t rows,
                      const std::vector<float*>& ys) {
  std::vector<size_t> shared;  // the packed layers of the first one's group
  std::vector<const cpu::QuantMatrix*> matrices;
  std::vector<float*> sharedYs;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Linear& l = *layers[i];
    if (l.matrix_ && l.format_.group == layers[0]->format_.group) {
      shared.push_back(i);
      matrices.push_back(l.matrix_.get());
      sharedYs.push_back(ys[i]);
    } else {
      l.apply(x, rows, ys[i]);
    }
  }
  if (shared.empty()) return;
  thread_local cpu::QuantActs acts;
  cpu::quantizeActs(x, rows, matrices[0]->cols(), matrices[0]->group(), acts);
  cpu::matmulAll(matrices, acts, sharedYs);
  for (size_t i : shared) layers[i]->addBias(ys[i], rows, 0, layers[i]->out_);
}

void Linear::apply(const float* x, int64_t rows, float* y) const {
  if (quantized_) return applyQuantized(x, rows, y);
  check(panels_ != nullptr, "Linear: this layer was made to read rows, not to multiply");
  constexpr int64_t width = cpu::kFloatPanelRows;
  const int64_t stepBytes = width * static_cast<int64_t>(dtypeSize(dtype_)), panelBytes = in_ * stepBytes;
  const int64_t panels = (out_ + width - 1) / width;
  const uint8_t* packed = panels_->data();
  if (rows <= kFewRows) {
    core::parallelFor(panels, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t first = p * width, count = std::min(width, out_ - first);
        cpu::floatPanelProduct(dtype_, packed + p * panelBytes, in_, x, in_, rows, y + first, out_, count);
        addBias(y, rows, first, count);
      }
    });
    return;
  }
  // Blocks of panels as f32 B [in, block width] (the panels' steps side by side) for sgemm.
  const int64_t blocks = (panels + kSgemmPanels - 1) / kSgemmPanels, blockWidth = kSgemmPanels * width;
  core::parallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> b(static_cast<size_t>(in_ * blockWidth));
    for (int64_t block = b0; block < b1; ++block) {
      const int64_t p0 = block * kSgemmPanels, p1 = std::min(panels, p0 + kSgemmPanels);
      for (int64_t p = p0; p < p1; ++p)
        for (int64_t c = 0; c < in_; ++c)
          cpu::loadF32(dtype_, packed + p * panelBytes + c * stepBytes, 1, width, b.data() + c * blockWidth + (p - p0) * width);
      const int64_t first = p0 * width, count = std::min(out_, p1 * width) - first;
      cpu::sgemm(rows, count, in_, x, in_, 1, b.data(), blockWidth, 1, y + first, out_, false);
      addBias(y, rows, first, count);
    }
  });
}

}  // namespace gizml::llm
