// QuantMatrix's AVX-VNNI kernel (256-bit vpdpbusd, VEX-encoded): quant_panels_avx2-inl.h under
// AVX2 + FMA + AVX-VNNI, on the AVX2 kernel's 8-row panels.
// The headers come before the target, so that their inline functions stay baseline code.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/quant_dot_kernels.h"
#include "cpu/quant_panels.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,avxvnni"))), apply_to = function)
#else
#pragma GCC target("avx2,fma,avxvnni")
#endif

#define GIZML_PANELS_VNNI 1
#define GIZML_PANELS_ENTRY panelsAvxVnni
#include "cpu/quant_panels_avx2-inl.h"

#if defined(__clang__)
#pragma clang attribute pop
#endif
