#pragma once
// The two inner loops of the group search (group_quant.cpp), over 8 lanes: lane j takes the
// values j, j + 8, j + 16, ... and the lanes are added in the order 0..7 at the end, so the AVX2
// body and the portable one give the same bits (a conversion does not depend on the CPU).
#include <cstdint>

namespace gizml::llm::group_search {

/// The sums a least-squares fit of x over codes l reads: sum l, sum l^2 (exact: integers below
/// 2^24 for 256 values of 8 bits) and sum l x (each product rounded to f32, added in f64).
struct FitSums {
  float sl = 0, sl2 = 0;
  double sxl = 0;
};

/// Codes l = clamp(floor((x - lo) * iscale + 0.5), 0, nmax) of n values (a multiple of 8).
FitSums fitSums(const float* x, int64_t n, float lo, float iscale, float nmax);

/// The squared error of codes q = clamp(floor(x * inv + z + 0.5), 0, nmax), valued s (q - z).
float squaredError(const float* x, int64_t n, float s, float inv, float z, float nmax);

// The bodies the two choose from (the portable ones and, in group_search_avx2.cpp, AVX2).
FitSums fitSumsPortable(const float* x, int64_t n, float lo, float iscale, float nmax);
float squaredErrorPortable(const float* x, int64_t n, float s, float inv, float z, float nmax);
FitSums fitSumsAvx2(const float* x, int64_t n, float lo, float iscale, float nmax);
float squaredErrorAvx2(const float* x, int64_t n, float s, float inv, float z, float nmax);

}  // namespace gizml::llm::group_search
