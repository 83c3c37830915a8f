// sgemm's driver, after GotoBLAS: blocks of C go to the threads; each packs panels of A and B
// into its own buffers (any strides become the kernel's layout there) and runs the SIMD
// micro-kernels over them (packing and kernels: gemm_kernel_simd.cpp). Few rows take a
// streaming path instead.
#include "cpu/gemm.h"

#include <hwy/aligned_allocator.h>

#include <algorithm>

#include "core/thread_pool.h"
#include "cpu/gemm_kernel.h"

namespace gizml::cpu {
namespace {

// An A block of kMcPanels row panels by kGemmKc stays in L2; a B block kGemmKc by kNc in L3.
constexpr int64_t kMcPanels = 24;
constexpr int64_t kNc = 2048;
// Below this many multiply-adds the threads cost more than they save.
constexpr int64_t kSerialWork = int64_t{1} << 18;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Operands {
  int64_t k;
  const float* a;
  int64_t ars, acs;
  const float* b;
  int64_t brs, bcs;
  float* c;
  int64_t ldc;
  bool accumulate;
  const PackingB* packB = nullptr;  // packs B's blocks instead of gemm::packB from b
};

// A thread's packing buffer, kept between calls; it grows when a call needs more.
class PackBuffer {
 public:
  float* get(int64_t floats) {
    if (floats > size_) {
      data_ = hwy::AllocateAligned<float>(static_cast<size_t>(floats));
      size_ = floats;
    }
    return data_.get();
  }

 private:
  hwy::AlignedFreeUniquePtr<float[]> data_;
  int64_t size_ = 0;
};

// Rows [i0, i1) by columns [j0, j1) of C, on the calling thread. Blocks of k run in order.
void gemmBlock(const Operands& o, gemm::Tile t, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  const int64_t mcMax = t.mr * kMcPanels;
  thread_local PackBuffer bufferA, bufferB;
  float* packedA = bufferA.get(mcMax * kGemmKc);
  float* packedB = bufferB.get(ceilDiv(kNc, t.nr) * t.nr * kGemmKc);
  for (int64_t jc = j0; jc < j1; jc += kNc) {
    const int64_t nc = std::min(kNc, j1 - jc);
    for (int64_t pc = 0; pc < o.k; pc += kGemmKc) {
      const int64_t kc = std::min(kGemmKc, o.k - pc);
      if (o.packB != nullptr) (*o.packB)(pc, kc, jc, nc, packedB);
      else gemm::packB(o.b + pc * o.brs + jc * o.bcs, o.brs, o.bcs, kc, nc, packedB);
      for (int64_t ic = i0; ic < i1; ic += mcMax) {
        const int64_t mc = std::min(mcMax, i1 - ic);
        gemm::packA(o.a + ic * o.ars + pc * o.acs, o.ars, o.acs, mc, kc, packedA);
        gemm::macroKernel(mc, nc, kc, packedA, packedB, o.c + ic * o.ldc + jc, o.ldc,
                          o.accumulate || pc > 0);
      }
    }
  }
}

// Splits C into a grid of about one block per thread, whole tiles each, choosing the shape
// that packs the least (each block packs its rows of A and its columns of B).
struct Grid {
  int64_t rows, cols;  // of one block
};
Grid chooseGrid(int64_t m, int64_t n, int64_t k, gemm::Tile t) {
  const int64_t threads = m * n * k < kSerialWork ? 1 : core::threadCount();
  int64_t bestM = 1, bestN = 1;
  for (int64_t tm = 1; tm <= threads; ++tm) {
    const int64_t rowBlocks = std::min(tm, ceilDiv(m, t.mr));
    const int64_t colBlocks = std::min(threads / tm, ceilDiv(n, t.nr));
    const int64_t blocks = rowBlocks * colBlocks, best = bestM * bestN;
    if (blocks > best || (blocks == best && m * colBlocks + n * rowBlocks < m * bestN + n * bestM)) {
      bestM = rowBlocks;
      bestN = colBlocks;
    }
  }
  return {ceilDiv(ceilDiv(m, bestM), t.mr) * t.mr, ceilDiv(ceilDiv(n, bestN), t.nr) * t.nr};
}

// C's blocks over the threads, each packing and multiplying its own.
void blocked(int64_t m, int64_t n, const Operands& o) {
  const gemm::Tile t = gemm::tile();
  const Grid g = chooseGrid(m, n, o.k, t);
  const int64_t colBlocks = ceilDiv(n, g.cols);
  core::parallelTasks(ceilDiv(m, g.rows) * colBlocks, [&](int64_t task) {
    const int64_t i0 = task / colBlocks * g.rows, j0 = task % colBlocks * g.cols;
    gemmBlock(o, t, i0, std::min(m, i0 + g.rows), j0, std::min(n, j0 + g.cols));
  });
}

}  // namespace

void sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs, const float* b,
           int64_t brs, int64_t bcs, float* c, int64_t ldc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0.0f);
    return;
  }
  if (m <= gemm::kStreamRows && bcs == 1) {  // GEMV-like: bound by reading B, split over n
    const int64_t grain = std::max<int64_t>(256, kSerialWork / (m * k));
    core::parallelFor(n, grain, [&](int64_t j0, int64_t j1) {
      gemm::streamRows(m, j1 - j0, k, a, ars, acs, b + j0, brs, c + j0, ldc, accumulate);
    });
    return;
  }
  blocked(m, n, {k, a, ars, acs, b, brs, bcs, c, ldc, accumulate});
}

void sgemmPackingB(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs, const PackingB& packB,
                   float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0.0f);
    return;
  }
  blocked(m, n, {k, a, ars, acs, nullptr, 0, 0, c, ldc, false, &packB});
}

}  // namespace gizml::cpu
