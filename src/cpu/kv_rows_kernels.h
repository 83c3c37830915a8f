#pragma once
// The AVX2 + F16C versions behind cpu/kv_rows.h (kv_rows_avx2.cpp); callers check the CPU first.
#include <gizml/dtype.h>

#include <cstdint>

namespace gizml::cpu::kv_kernels {

float dotAvx2(DType t, const void* row, const float* x, int64_t n);
void addScaledAvx2(DType t, const void* row, float a, float* y, int64_t n);

}  // namespace gizml::cpu::kv_kernels
