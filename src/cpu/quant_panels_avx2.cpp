// QuantMatrix's AVX2 kernel (maddubs): quant_panels_avx2-inl.h under AVX2 + FMA.
// The headers come before the target, so that their inline functions stay baseline code.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/quant_dot_kernels.h"
#include "cpu/quant_panels.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC target("avx2,fma")
#endif

#define GIZML_PANELS_VNNI 0
#define GIZML_PANELS_ENTRY panelsAvx2
#include "cpu/quant_panels_avx2-inl.h"

#if defined(__clang__)
#pragma clang attribute pop
#endif
