// sgemm's micro-kernels, written once with Highway and compiled for each x86 target; the
// dispatcher picks the best one the CPU supports at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/gemm_kernel_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "cpu/gemm.h"
#include "cpu/gemm_kernel.h"

HWY_BEFORE_NAMESPACE();
namespace gizml::cpu::gemm {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

constexpr int64_t kN = static_cast<int64_t>(hn::MaxLanes(D()));
// Two vectors of columns; rows fill the rest of the register file (16 or 32 registers).
constexpr int64_t kVecs = 2;
constexpr int64_t kNr = kVecs * kN;
constexpr int64_t kMr = kN >= 16 ? 14 : 6;

// The documented order needs a fused multiply-add; targets without one do it lane by lane.
HWY_INLINE V Fma(D d, V a, V b, V c) {
#if HWY_NATIVE_FMA
  (void)d;
  return hn::MulAdd(a, b, c);
#else
  HWY_ALIGN float x[kN], y[kN], z[kN];
  hn::Store(a, d, x);
  hn::Store(b, d, y);
  hn::Store(c, d, z);
  for (int64_t i = 0; i < kN; ++i) z[i] = std::fma(x[i], y[i], z[i]);
  return hn::Load(d, z);
#endif
}

// One kRows x kNr tile of C from an A panel and a B panel; `cols` < kNr at the right edge.
template <int64_t kRows>
void TileKernel(int64_t kc, const float* HWY_RESTRICT pa, const float* HWY_RESTRICT pb,
                float* HWY_RESTRICT c, int64_t ldc, int64_t cols, bool add) {
  const D d;
  // C is read at the end: start fetching it now so the loop hides the miss (C often is in DRAM).
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t j = 0; j < cols; j += 16) hwy::Prefetch(c + r * ldc + j);
    hwy::Prefetch(c + r * ldc + cols - 1);
  }
  V acc[kRows][kVecs];
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t v = 0; v < kVecs; ++v) acc[r][v] = hn::Zero(d);
  HWY_UNROLL(4)  // spreads the loop bookkeeping over more fmas (about 10% at 1024 and up)
  for (int64_t p = 0; p < kc; ++p, pa += kMr, pb += kNr) {
    V b[kVecs];
    for (int64_t v = 0; v < kVecs; ++v) b[v] = hn::Load(d, pb + v * kN);
    for (int64_t r = 0; r < kRows; ++r) {
      const V a = hn::Set(d, pa[r]);
      for (int64_t v = 0; v < kVecs; ++v) acc[r][v] = Fma(d, a, b[v], acc[r][v]);
    }
  }
  if (cols == kNr) {
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t v = 0; v < kVecs; ++v) {
        float* out = c + r * ldc + v * kN;
        hn::StoreU(add ? hn::Add(hn::LoadU(d, out), acc[r][v]) : acc[r][v], d, out);
      }
    return;
  }
  HWY_ALIGN float tile[kRows * kNr];
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t v = 0; v < kVecs; ++v) hn::Store(acc[r][v], d, tile + r * kNr + v * kN);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      float& out = c[r * ldc + j];
      out = add ? out + tile[r * kNr + j] : tile[r * kNr + j];
    }
}

using TileFn = void (*)(int64_t, const float*, const float*, float*, int64_t, int64_t, bool);

template <size_t... I>
constexpr std::array<TileFn, sizeof...(I)> TileKernels(std::index_sequence<I...>) {
  return {&TileKernel<static_cast<int64_t>(I) + 1>...};
}

Tile TileShape() { return {kMr, kNr}; }

void PackA(const float* a, int64_t ars, int64_t acs, int64_t mc, int64_t kc, float* HWY_RESTRICT out) {
  for (int64_t i = 0; i < mc; i += kMr, out += kMr * kc) {
    const float* rows = a + i * ars;
    if (mc - i < kMr) {  // the last panel: its rows only (the kernel reads no more)
      for (int64_t r = 0; r < mc - i; ++r)
        for (int64_t p = 0; p < kc; ++p) out[p * kMr + r] = rows[r * ars + p * acs];
    } else {
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t r = 0; r < kMr; ++r) out[p * kMr + r] = rows[r * ars + p * acs];
    }
  }
}

void PackB(const float* b, int64_t brs, int64_t bcs, int64_t kc, int64_t nc, float* HWY_RESTRICT out) {
  const D d;
  const int64_t full = nc / kNr * kNr;
  if (full < nc)  // the last panel's columns past nc are zero: padding lanes compute harmless values
    for (int64_t p = 0; p < kc; ++p) std::fill_n(out + full * kc + p * kNr + (nc - full), kNr - (nc - full), 0.0f);
  if (bcs == 1) {  // a row at a time, so B's reads stream
    for (int64_t p = 0; p < kc; ++p) {
      const float* row = b + p * brs;
      for (int64_t j = 0; j < full; j += kNr)
        for (int64_t v = 0; v < kVecs; ++v) hn::Store(hn::LoadU(d, row + j + v * kN), d, out + j * kc + p * kNr + v * kN);
      std::copy(row + full, row + nc, out + full * kc + p * kNr);
    }
    return;
  }
  for (int64_t j = 0; j < nc; ++j) {  // a column at a time: contiguous reads for a transposed B
    float* panel = out + (j - j % kNr) * kc + j % kNr;
    for (int64_t p = 0; p < kc; ++p) panel[p * kNr] = b[j * bcs + p * brs];
  }
}

void MacroKernel(int64_t mc, int64_t nc, int64_t kc, const float* packedA, const float* packedB,
                 float* c, int64_t ldc, bool add) {
  static constexpr auto kKernels = TileKernels(std::make_index_sequence<kMr>());
  // Column panels outside: one B panel stays in L1 while the A panels stream from L2.
  for (int64_t j = 0; j < nc; j += kNr) {
    const int64_t cols = std::min(kNr, nc - j);
    for (int64_t i = 0; i < mc; i += kMr) {
      const int64_t rows = std::min(kMr, mc - i);
      kKernels[rows - 1](kc, packedA + i * kc, packedB + j * kc, c + i * ldc + j, ldc, cols, add);
    }
  }
}

// kRows rows of C against a row-major B: each k block's sums collect in a buffer that stays in
// L1 while B streams past once, a row segment at a time.
template <int64_t kRows>
void StreamKernel(int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs, const float* b,
                  int64_t brs, float* c, int64_t ldc, bool accumulate) {
  constexpr int64_t kWidth = 4096 / kRows / kN * kN, kPrefetchRows = 8;
  const D d;
  HWY_ALIGN float acc[kRows][kWidth];
  for (int64_t j0 = 0; j0 < n; j0 += kWidth) {
    const int64_t width = std::min(kWidth, n - j0), vecEnd = width / kN * kN;
    for (int64_t k0 = 0; k0 < k; k0 += kGemmKc) {
      for (int64_t r = 0; r < kRows; ++r) std::fill_n(acc[r], width, 0.0f);
      for (int64_t p = k0; p < std::min(k, k0 + kGemmKc); ++p) {
        const float* row = b + p * brs + j0;
        // Rows far apart (a KV cache's values, a head's row in each position's) are each on their
        // own 4 KiB page, where the hardware's prefetchers stop: ask for a row a few ahead (for
        // adjacent rows the request is one the hardware has made already).
        if (p + kPrefetchRows < k)
          for (int64_t j = 0; j < width; j += 16) hwy::Prefetch(row + kPrefetchRows * brs + j);
        float as[kRows];
        V av[kRows];
        for (int64_t r = 0; r < kRows; ++r) {
          as[r] = a[r * ars + p * acs];
          av[r] = hn::Set(d, as[r]);
        }
        for (int64_t j = 0; j < vecEnd; j += kN) {
          const V bv = hn::LoadU(d, row + j);
          for (int64_t r = 0; r < kRows; ++r)
            hn::Store(Fma(d, av[r], bv, hn::Load(d, acc[r] + j)), d, acc[r] + j);
        }
        for (int64_t j = vecEnd; j < width; ++j)
          for (int64_t r = 0; r < kRows; ++r) acc[r][j] = std::fma(as[r], row[j], acc[r][j]);
      }
      const bool add = accumulate || k0 > 0;
      for (int64_t r = 0; r < kRows; ++r) {
        float* out = c + r * ldc + j0;
        for (int64_t j = 0; j < width; ++j) out[j] = add ? out[j] + acc[r][j] : acc[r][j];
      }
    }
  }
}

void StreamRows(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs,
                const float* b, int64_t brs, float* c, int64_t ldc, bool accumulate) {
  static_assert(kStreamRows == 4);
  switch (m) {
    case 1: return StreamKernel<1>(n, k, a, ars, acs, b, brs, c, ldc, accumulate);
    case 2: return StreamKernel<2>(n, k, a, ars, acs, b, brs, c, ldc, accumulate);
    case 3: return StreamKernel<3>(n, k, a, ars, acs, b, brs, c, ldc, accumulate);
    default: return StreamKernel<4>(n, k, a, ars, acs, b, brs, c, ldc, accumulate);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace gizml::cpu::gemm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gizml::cpu::gemm {
HWY_EXPORT(TileShape);
HWY_EXPORT(PackA);
HWY_EXPORT(PackB);
HWY_EXPORT(MacroKernel);
HWY_EXPORT(StreamRows);

Tile tile() { return HWY_DYNAMIC_DISPATCH(TileShape)(); }

void packA(const float* a, int64_t ars, int64_t acs, int64_t mc, int64_t kc, float* out) {
  HWY_DYNAMIC_DISPATCH(PackA)(a, ars, acs, mc, kc, out);
}

void packB(const float* b, int64_t brs, int64_t bcs, int64_t kc, int64_t nc, float* out) {
  HWY_DYNAMIC_DISPATCH(PackB)(b, brs, bcs, kc, nc, out);
}

void macroKernel(int64_t mc, int64_t nc, int64_t kc, const float* packedA, const float* packedB,
                 float* c, int64_t ldc, bool add) {
  HWY_DYNAMIC_DISPATCH(MacroKernel)(mc, nc, kc, packedA, packedB, c, ldc, add);
}

void streamRows(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs,
                const float* b, int64_t brs, float* c, int64_t ldc, bool accumulate) {
  HWY_DYNAMIC_DISPATCH(StreamRows)(m, n, k, a, ars, acs, b, brs, c, ldc, accumulate);
}
}  // namespace gizml::cpu::gemm
#endif
