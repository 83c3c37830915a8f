#include "cpu/float_panels.h"

#include <gizml/error.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/thread_pool.h"
#include "cpu/convert.h"
#include "cpu/cpu_features.h"
#include "cpu/gemm.h"

namespace gizml::cpu {
namespace {

float valueAt(DType t, const void* panel, int64_t i) {
  switch (t) {
    case DType::F16: return halfToFloat(static_cast<const uint16_t*>(panel)[i]);
    case DType::BF16: return bf16ToFloat(static_cast<const uint16_t*>(panel)[i]);
    default: return static_cast<const float*>(panel)[i];
  }
}

}  // namespace

core::PageVector<uint8_t> packFloatPanels(DType t, const void* w, int64_t rows, int64_t cols) {
  check(t == DType::F32 || t == DType::F16 || t == DType::BF16,
        std::string("float panels: F32, F16 or BF16 weights, not ") + dtypeName(t));
  const auto size = static_cast<int64_t>(dtypeSize(t));
  const int64_t panels = (rows + kFloatPanelRows - 1) / kFloatPanelRows;
  core::PageVector<uint8_t> out(static_cast<size_t>(panels * cols * kFloatPanelRows * size), 0);
  const auto* in = static_cast<const uint8_t*>(w);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* panel = out.data() + r / kFloatPanelRows * cols * kFloatPanelRows * size;
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(panel + (c * kFloatPanelRows + r % kFloatPanelRows) * size, in + (r * cols + c) * size,
                  static_cast<size_t>(size));
  }
  return out;
}

namespace {
bool floatPanelsSimd() {
  static const bool simd = cpuFeatures().avx2 && cpuFeatures().fma && cpuFeatures().f16c;
  return simd;
}
}  // namespace

const char* floatPanelsKernel() { return floatPanelsSimd() ? "avx2+fma+f16c" : "portable"; }

void floatPanelProduct(DType t, const void* panel, int64_t k, const float* x, int64_t ldx, int64_t m, float* y,
                       int64_t ldy, int64_t cols) {
  check(m >= 1 && m <= 4 && cols >= 1 && cols <= kFloatPanelRows, "floatPanelProduct: 1 to 4 rows of 1 to 16 columns");
  float out[4][kFloatPanelRows];
  if (floatPanelsSimd()) {
    float_panel_kernels::productAvx2(t, panel, k, x, ldx, m, out[0]);
  } else {
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < cols; ++j) {
        float total = 0.0f;
        for (int64_t k0 = 0; k0 < k; k0 += kGemmKc) {
          float block = 0.0f;
          for (int64_t p = k0; p < std::min(k, k0 + kGemmKc); ++p)
            block = std::fma(x[r * ldx + p], valueAt(t, panel, p * kFloatPanelRows + j), block);
          total = k0 == 0 ? block : total + block;
        }
        out[r][j] = total;
      }
  }
  for (int64_t r = 0; r < m; ++r) std::copy(out[r], out[r] + cols, y + r * ldy);
}

void floatPanelsMatmul(DType t, const uint8_t* packed, int64_t out, int64_t in, const float* x, int64_t rows,
                       float* y) {
  // Passes of up to this many rows take the panel kernel, one panel a task; more go through
  // sgemm, kSgemmPanels panels a block.
  constexpr int64_t kFewRows = 4, kSgemmPanels = 4;
  constexpr int64_t width = kFloatPanelRows;
  const int64_t stepBytes = width * static_cast<int64_t>(dtypeSize(t)), panelBytes = in * stepBytes;
  const int64_t panels = (out + width - 1) / width;
  if (rows <= kFewRows) {
    core::parallelFor(panels, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t first = p * width;
        floatPanelProduct(t, packed + p * panelBytes, in, x, in, rows, y + first, out, std::min(width, out - first));
      }
    });
    return;
  }
  // Blocks of panels as f32 B [in, block width] (the panels' steps side by side) for sgemm.
  const int64_t blocks = (panels + kSgemmPanels - 1) / kSgemmPanels, blockWidth = kSgemmPanels * width;
  core::parallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> b(static_cast<size_t>(in * blockWidth));
    for (int64_t block = b0; block < b1; ++block) {
      const int64_t p0 = block * kSgemmPanels, p1 = std::min(panels, p0 + kSgemmPanels);
      for (int64_t p = p0; p < p1; ++p)
        for (int64_t c = 0; c < in; ++c)
          loadF32(t, packed + p * panelBytes + c * stepBytes, 1, width, b.data() + c * blockWidth + (p - p0) * width);
      const int64_t first = p0 * width, count = std::min(out, p1 * width) - first;
      sgemm(rows, count, in, x, in, 1, b.data(), blockWidth, 1, y + first, out, false);
    }
  });
}

}  // namespace gizml::cpu
