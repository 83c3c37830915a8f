// quantDot's AVX2 kernel (maddubs + madd); BMI2's pdep unpacks the odd bit widths.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/quant_dot_kernels.h"

// (clang ignores GCC's pragma: it takes the same targets as an attribute of every function.)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,bmi2"))), apply_to = function)
#else
#pragma GCC target("avx2,fma,bmi2")
#endif
#define QD_KERNEL dotAvx2
#define QD_VNNI 0
#include "cpu/quant_dot_x86.inc"

#if defined(__clang__)
#pragma clang attribute pop
#endif
