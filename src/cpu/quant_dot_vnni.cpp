// quantDot's AVX-VNNI kernel (dpbusd: the four-product sums in one instruction). Compiled here
// but untested on our AMD Zen 3 machines, which lack AVX-VNNI; the dispatcher skips it there.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/quant_dot_kernels.h"

#pragma GCC target("avx2,fma,bmi2,avxvnni")
#define QD_KERNEL dotAvxVnni
#define QD_VNNI 1
#include "cpu/quant_dot_x86.inc"
