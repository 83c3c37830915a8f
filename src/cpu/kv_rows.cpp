#include "cpu/kv_rows.h"

#include "cpu/cpu_features.h"
#include "cpu/kv_rows_kernels.h"

namespace gizml::cpu {
namespace {

bool hasSimd() {
  const CpuFeatures& f = cpuFeatures();
  return f.avx2 && f.fma && f.f16c;
}

float valueAt(DType t, const void* row, int64_t i) {
  switch (t) {
    case DType::F16: return halfToFloat(static_cast<const uint16_t*>(row)[i]);
    case DType::BF16: return bf16ToFloat(static_cast<const uint16_t*>(row)[i]);
    default: return static_cast<const float*>(row)[i];
  }
}

}  // namespace

float dotStoredRow(DType t, const void* row, const float* x, int64_t n) {
  if (hasSimd()) return kv_kernels::dotAvx2(t, row, x, n);
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += x[i] * valueAt(t, row, i);
  return s;
}

const char* storedRowsKernel() { return hasSimd() ? "avx2+f16c" : "portable"; }

void addScaledStoredRow(DType t, const void* row, float a, float* y, int64_t n) {
  if (hasSimd()) return kv_kernels::addScaledAvx2(t, row, a, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] += a * valueAt(t, row, i);
}

}  // namespace gizml::cpu
