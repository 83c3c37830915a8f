#include "llm/quant/group_quant.h"

#include <gizml/error.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/quant_dot.h"
#include "llm/quant/group_search.h"

namespace gizml::llm {
namespace {

constexpr int kExponentSteps = 32;  // scales step by 2^(1/32): 2.2 %, over 2^8 below the base
constexpr int kCandidates = 24;     // range widths tried per group, as llama.cpp's make_qkx2_quants

struct Lut {
  std::array<float, 256> scale;
};

Lut makeLut(float base) {
  Lut l;
  for (int e = 0; e < 256; ++e) l.scale[static_cast<size_t>(e)] = groupScale(base, e);
  return l;
}

void packCodes(const uint8_t* q, int64_t n, int bits, uint8_t* out) {
  uint64_t acc = 0;
  int filled = 0;
  for (int64_t i = 0; i < n; ++i) {
    acc |= static_cast<uint64_t>(q[i]) << filled;
    filled += bits;
    while (filled >= 8) {
      *out++ = static_cast<uint8_t>(acc);
      acc >>= 8;
      filled -= 8;
    }
  }
}

// The best (e, z) for one group of n values. A candidate affine fit (s, m) from least squares
// on one rounding of the group is moved to the neighbouring grid points of e and z; each is
// scored by the squared error of its own optimal codes.
struct GroupSearch {
  const Lut& lut;
  float base;
  int nmax;
  float zStep;  // nmax / 255: the value of one zero point code
  const float* x;
  int64_t n;
  float bestErr = std::numeric_limits<float>::infinity();
  int bestE = 0;
  int bestZ = 0;
  std::array<uint16_t, 4 * (kCandidates + 1) + 1> tried{};  // (e, z) scored so far
  int triedCount = 0;

  void tryFit(float s, float m) {
    if (!(s > 0.0f)) return;
    const float e0 = std::floor(std::log2(s / base) * kExponentSteps) + 255.0f;
    const int eLow = static_cast<int>(std::clamp(e0, 0.0f, 254.0f));
    for (int e = eLow; e <= eLow + 1; ++e) {
      const float z0 = std::floor(-m / lut.scale[static_cast<size_t>(e)] / zStep);
      const int zLow = static_cast<int>(std::clamp(z0, 0.0f, 254.0f));
      score(e, zLow);
      score(e, zLow + 1);
    }
  }

  void score(int e, int zc) {
    // Neighbouring candidates often land on the same grid point: each is scored once.
    const auto key = static_cast<uint16_t>(e * 256 + zc);
    if (std::find(tried.begin(), tried.begin() + triedCount, key) != tried.begin() + triedCount) return;
    tried[static_cast<size_t>(triedCount++)] = key;
    const float s = lut.scale[static_cast<size_t>(e)];
    const float z = static_cast<float>(zc) * zStep;
    const float err = group_search::squaredError(x, n, s, 1.0f / s, z, static_cast<float>(nmax));
    if (err < bestErr) {
      bestErr = err;
      bestE = e;
      bestZ = zc;
    }
  }
};

void quantizeGroup(const GroupFormat& f, const Lut& lut, float base, const float* x, uint8_t* block) {
  const int nmax = (1 << f.bits) - 1;
  const int64_t n = f.group;
  float lo = x[0], hi = x[0];
  double sumX = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sumX += x[i];
  }
  GroupSearch search{lut, base, nmax, static_cast<float>(nmax) / 255.0f, x, n};
  if (hi == lo) {
    // A constant v: all codes at nmax (v > 0) or at the zero point nmax (v < 0).
    if (lo != 0.0f) search.tryFit(std::abs(lo) / static_cast<float>(nmax), std::min(lo, 0.0f));
  } else {
    for (int c = 0; c <= kCandidates; ++c) {
      const float iscale = (static_cast<float>(nmax) - 1.0f + 2.0f * c / kCandidates) / (hi - lo);
      const group_search::FitSums f = group_search::fitSums(x, n, lo, iscale, static_cast<float>(nmax));
      const double sl = f.sl, sl2 = f.sl2, sxl = f.sxl;
      const double det = static_cast<double>(n) * sl2 - sl * sl;
      if (det <= 0) continue;
      const double s = (static_cast<double>(n) * sxl - sumX * sl) / det;
      const double m = (sl2 * sumX - sl * sxl) / det;
      search.tryFit(static_cast<float>(s), static_cast<float>(m));
    }
  }
  if (!std::isfinite(search.bestErr)) search.score(0, 0);  // all zeros
  block[0] = static_cast<uint8_t>(search.bestE);
  block[1] = static_cast<uint8_t>(search.bestZ);
  const float inv = 1.0f / lut.scale[static_cast<size_t>(search.bestE)];
  const float z = static_cast<float>(search.bestZ) * search.zStep;
  uint8_t q[256];
  for (int64_t i = 0; i < n; ++i)
    q[i] = static_cast<uint8_t>(std::clamp(std::floor(x[i] * inv + z + 0.5f), 0.0f, static_cast<float>(nmax)));
  packCodes(q, n, f.bits, block + 2);
}

}  // namespace

void checkGroupFormat(const GroupFormat& f, const char* what) {
  check(f.bits >= 2 && f.bits <= 8, std::string(what) + ": bits must be 2..8, not " + std::to_string(f.bits));
  check(f.group >= 8 && f.group <= 256 && f.group % 8 == 0,
        std::string(what) + ": group must be a multiple of 8 from 8 to 256, not " + std::to_string(f.group));
}

int64_t groupBlockBytes(const GroupFormat& f) { return 2 + f.group * f.bits / 8; }

int64_t groupRowBytes(const GroupFormat& f, int64_t cols) { return cols / f.group * groupBlockBytes(f); }

float groupScale(float base, int e) { return cpu::exponentScale(base, e); }

float quantizeGroups(const GroupFormat& f, const float* src, int64_t rows, int64_t cols, uint8_t* dst) {
  checkGroupFormat(f, "quantize");
  check(cols % f.group == 0, "quantize: " + std::to_string(cols) + " columns are not groups of " +
                                 std::to_string(f.group));
  // The base is the largest scale a group can want: its range over nmax - 1 levels.
  const int64_t groups = rows * cols / f.group;
  std::vector<float> ranges(static_cast<size_t>(std::max<int64_t>(groups, 1)), 0.0f);
  core::parallelFor(groups, 256, [&](int64_t b, int64_t e) {
    for (int64_t g = b; g < e; ++g) {
      const float* x = src + g * f.group;
      const auto [lo, hi] = std::minmax_element(x, x + f.group);
      // A constant group's range reaches zero (quantizeGroup widens it so).
      ranges[static_cast<size_t>(g)] = *hi == *lo ? std::abs(*hi) : *hi - *lo;
    }
  });
  const float maxRange = groups > 0 ? *std::max_element(ranges.begin(), ranges.end()) : 0.0f;
  const int nmax = (1 << f.bits) - 1;
  const float base = maxRange > 0 ? maxRange / static_cast<float>(nmax - 1) : 1.0f;
  const Lut lut = makeLut(base);
  const int64_t blockBytes = groupBlockBytes(f);
  core::parallelFor(groups, 64, [&](int64_t b, int64_t e) {
    for (int64_t g = b; g < e; ++g) quantizeGroup(f, lut, base, src + g * f.group, dst + g * blockBytes);
  });
  return base;
}

void dequantizeGroups(const GroupFormat& f, float base, const uint8_t* src, int64_t rows, int64_t cols,
                      float* dst) {
  checkGroupFormat(f, "dequantize");
  check(cols % f.group == 0, "dequantize: " + std::to_string(cols) + " columns are not groups of " +
                                 std::to_string(f.group));
  const Lut lut = makeLut(base);
  const int64_t groups = rows * cols / f.group;
  const int64_t blockBytes = groupBlockBytes(f);
  const float zStep = static_cast<float>((1 << f.bits) - 1) / 255.0f;
  core::parallelFor(groups, 256, [&](int64_t b, int64_t e) {
    uint8_t q[256];
    for (int64_t g = b; g < e; ++g) {
      const uint8_t* block = src + g * blockBytes;
      const float s = lut.scale[block[0]];
      const float z = static_cast<float>(block[1]) * zStep;
      cpu::unpackCodes(block + 2, f.group, f.bits, q);
      float* out = dst + g * f.group;
      for (int64_t i = 0; i < f.group; ++i) out[i] = s * (static_cast<float>(q[i]) - z);
    }
  });
}

}  // namespace gizml::llm
