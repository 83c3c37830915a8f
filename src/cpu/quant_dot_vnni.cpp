// quantDot's AVX-VNNI kernel (dpbusd: the four-product sums in one instruction). Compiled here
// but untested on our AMD Zen 3 machines, which lack AVX-VNNI; the dispatcher skips it there.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/quant_dot_kernels.h"

// (clang ignores GCC's pragma: it takes the same targets as an attribute of every function.)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,bmi2,avxvnni"))), apply_to = function)
#else
#pragma GCC target("avx2,fma,bmi2,avxvnni")
#endif
#define QD_KERNEL dotAvxVnni
#define QD_VNNI 1
#include "cpu/quant_dot_x86.inc"

#if defined(__clang__)
#pragma clang attribute pop
#endif
