// quantDot's AVX2 kernel (maddubs + madd); BMI2's pdep unpacks the odd bit widths.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/quant_dot_kernels.h"

#pragma GCC target("avx2,fma,bmi2")
#define QD_KERNEL dotAvx2
#define QD_VNNI 0
#include "cpu/quant_dot_x86.inc"
