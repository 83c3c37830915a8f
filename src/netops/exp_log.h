#pragma once
// gz_exp and gz_log (netops/exp_log.inc) for the host: the functions the GPU kernels use, so
// both compute the same bits.
#include <bit>
#include <cmath>
#include <limits>

// Hot loops full of fmas are compiled also for x86's FMA instructions (the library is built
// without -mfma, so each std::fma would otherwise be a libm call); the same bits either way.
#if defined(__x86_64__)
#define GIZML_FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define GIZML_FMA_CLONES
#endif

namespace gizml::netops::detail {

using std::fmaf;

#define GZ_SHARED(...) __VA_ARGS__
#define GZ_FN inline
#define GZ_INF std::numeric_limits<float>::infinity()
#define GZ_NAN_F std::numeric_limits<float>::quiet_NaN()
#define GZ_AS_FLOAT(u) std::bit_cast<float>(static_cast<unsigned>(u))
#define GZ_AS_UINT(f) std::bit_cast<unsigned>(f)
#include "netops/exp_log.inc"
#undef GZ_SHARED
#undef GZ_FN
#undef GZ_INF
#undef GZ_NAN_F
#undef GZ_AS_FLOAT
#undef GZ_AS_UINT

}  // namespace gizml::netops::detail
