#include "cpu/float_panels.h"

#include <gizml/error.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/thread_pool.h"
#include "cpu/convert.h"
#include "cpu/cpu_features.h"
#include "cpu/gemm.h"
#include "cpu/gemm_kernel.h"

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

bool floatPanelKernelRuns(FloatPanelKernel kernel) {
  const CpuFeatures& f = cpuFeatures();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  switch (kernel) {
    case FloatPanelKernel::Avx512: return avx2 && f.avx512f;
    case FloatPanelKernel::Avx2: return avx2;
    default: return true;
  }
}

namespace {

FloatPanelKernel bestFloatPanelKernel() {
  static const FloatPanelKernel best = floatPanelKernelRuns(FloatPanelKernel::Avx512) ? FloatPanelKernel::Avx512
                                       : floatPanelKernelRuns(FloatPanelKernel::Avx2) ? FloatPanelKernel::Avx2
                                                                                      : FloatPanelKernel::Portable;
  return best;
}

// out [m][panels * 16]: the portable kernel, each column's fma chain as sgemm's.
void productPortable(DType t, const void* panel, int64_t panels, int64_t k, const float* x, int64_t ldx, int64_t m,
                     float* out) {
  const int64_t width = panels * kFloatPanelRows, panelElems = k * kFloatPanelRows;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < width; ++j) {
      const int64_t first = j / kFloatPanelRows * panelElems + j % kFloatPanelRows;
      float total = 0.0f;
      for (int64_t k0 = 0; k0 < k; k0 += kGemmKc) {
        float block = 0.0f;
        for (int64_t p = k0; p < std::min(k, k0 + kGemmKc); ++p)
          block = std::fma(x[r * ldx + p], valueAt(t, panel, first + p * kFloatPanelRows), block);
        total = k0 == 0 ? block : total + block;
      }
      out[r * width + j] = total;
    }
}

}  // namespace

const char* floatPanelKernelName(FloatPanelKernel kernel) {
  switch (kernel) {
    case FloatPanelKernel::Avx512: return "avx512f";
    case FloatPanelKernel::Avx2: return "avx2+fma+f16c";
    default: return "portable";
  }
}

const char* floatPanelsKernel() { return floatPanelKernelName(bestFloatPanelKernel()); }

namespace {

void checkProductShape(int64_t panels, int64_t m, int64_t cols) {
  check(m >= 1 && m <= 4 && panels >= 1 && panels <= kFloatPanelGroup && cols >= 1 && cols <= panels * kFloatPanelRows,
        "floatPanelProduct: 1 to 4 rows of 1 to 16 columns a panel, 1 to 4 panels");
}

// floatPanelProduct after its checks (floatPanelsMatmul's calls need none).
void productBy(FloatPanelKernel kernel, DType t, const void* panel, int64_t panels, int64_t k, const float* x,
               int64_t ldx, int64_t m, float* y, int64_t ldy, int64_t cols) {
  float out[4 * kFloatPanelGroup * kFloatPanelRows];
  switch (kernel) {
    case FloatPanelKernel::Avx512: float_panel_kernels::productAvx512(t, panel, panels, k, x, ldx, m, out); break;
    case FloatPanelKernel::Avx2: float_panel_kernels::productAvx2(t, panel, panels, k, x, ldx, m, out); break;
    default: productPortable(t, panel, panels, k, x, ldx, m, out);
  }
  const int64_t width = panels * kFloatPanelRows;
  for (int64_t r = 0; r < m; ++r) std::copy(out + r * width, out + r * width + cols, y + r * ldy);
}

}  // namespace

void floatPanelProduct(FloatPanelKernel kernel, DType t, const void* panel, int64_t panels, int64_t k, const float* x,
                       int64_t ldx, int64_t m, float* y, int64_t ldy, int64_t cols) {
  checkProductShape(panels, m, cols);
  check(floatPanelKernelRuns(kernel), "floatPanelProduct: this CPU does not run the kernel asked for");
  productBy(kernel, t, panel, panels, k, x, ldx, m, y, ldy, cols);
}

void floatPanelProduct(DType t, const void* panel, int64_t panels, int64_t k, const float* x, int64_t ldx, int64_t m,
                       float* y, int64_t ldy, int64_t cols) {
  checkProductShape(panels, m, cols);
  productBy(bestFloatPanelKernel(), t, panel, panels, k, x, ldx, m, y, ldy, cols);
}

void floatPanelsMatmul(DType t, const uint8_t* packed, int64_t out, int64_t in, const float* x, int64_t rows,
                       float* y) {
  // Passes of up to this many rows take the panel kernel, kFloatPanelGroup panels a task.
  constexpr int64_t kFewRows = 4;
  constexpr int64_t width = kFloatPanelRows;
  const int64_t stepBytes = width * static_cast<int64_t>(dtypeSize(t)), panelBytes = in * stepBytes;
  const int64_t panels = (out + width - 1) / width;
  if (rows <= kFewRows) {
    const int64_t groups = (panels + kFloatPanelGroup - 1) / kFloatPanelGroup;
    const FloatPanelKernel kernel = bestFloatPanelKernel();
    // Each thread a contiguous span of groups first (neighbouring panels on one thread), then the
    // others' last ones: a thread slowed by the rest of the machine leaves its share to the others.
    core::parallelSpans(groups, [&](int64_t g) {
      const int64_t p = g * kFloatPanelGroup, first = p * width;
      productBy(kernel, t, packed + p * panelBytes, std::min(kFloatPanelGroup, panels - p), in, x, in, rows, y + first,
                out, std::min(kFloatPanelGroup * width, out - first));
    });
    return;
  }
  // Through sgemm, its blocks of B packed straight from the panels: no f32 copy of the weights,
  // and x packed once per block of B rather than once per block of panels.
  const int64_t nr = gemm::tile().nr, size = static_cast<int64_t>(dtypeSize(t));
  const PackingB pack = [&](int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
    // nr columns at a time, at most a panel's 16: nr is a power of two and j0 a multiple of it,
    // so no chunk crosses from one panel into the next.
    const int64_t padded = (nc + nr - 1) / nr * nr, chunk = std::min(nr, width);
    for (int64_t c = 0; c < padded; c += chunk) {
      const int64_t col = j0 + c;
      float* panel = dst + c / nr * nr * kc + c % nr;
      if (col >= out) {  // past the weights' rows: zeros, as packB pads
        for (int64_t p = 0; p < kc; ++p) std::fill_n(panel + p * nr, chunk, 0.0f);
        continue;
      }
      const uint8_t* src = packed + col / width * panelBytes + p0 * stepBytes + col % width * size;
      for (int64_t p = 0; p < kc; ++p) loadF32(t, src + p * stepBytes, 1, chunk, panel + p * nr);
    }
  };
  sgemmPackingB(rows, out, in, x, in, 1, pack, y, out);
}

}  // namespace gizml::cpu
