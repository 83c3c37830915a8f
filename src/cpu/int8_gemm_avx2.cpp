// int8_gemm.h's AVX2 kernel (vpmaddwd on bytes widened to i16): int8_gemm_256-inl.h under its target.
// The headers (all of the -inl's) come before the target, so that their inline functions stay
// baseline code.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/int8_gemm.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC target("avx2,fma")
#endif

#define GIZML_INT8_VNNI 0
#define GIZML_INT8_ENTRY gemmAvx2
#include "cpu/int8_gemm_256-inl.h"

#if defined(__clang__)
#pragma clang attribute pop
#endif
