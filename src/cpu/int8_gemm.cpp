// int8Gemm's driver (int8_gemm.h): the portable loop, and for the SIMD kernels the activations
// shifted to unsigned bytes and the weight rows' sums (AVX-VNNI), then blocks of outputs in
// parallel; AVX-512 VNNI's whole product (it packs the weights).
#include "cpu/int8_gemm.h"

#include <gizml/error.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/thread_pool.h"

namespace gizml::cpu {

namespace {

// Activation rows of a block, and a block's weight rows: as many as keep about 256 KB of weights
// in L2 while the block's activation rows pass over them (at least a micro-tile's 4).
constexpr int64_t kBlockRows = 64;
int64_t blockWeightRows(int64_t k) { return std::clamp<int64_t>(262144 / std::max<int64_t>(k, 1) / 4 * 4, 4, 64); }

void portable(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* w, int64_t ldw, int32_t* c,
              int64_t ldc) {
  core::parallelFor(m, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t j = 0; j < n; ++j) {
        uint32_t sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += static_cast<uint32_t>(a[i * lda + p] * w[j * ldw + p]);
        c[i * ldc + j] = static_cast<int32_t>(sum);
      }
  });
}

}  // namespace

void int8Gemm(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* w, int64_t ldw, int32_t* c,
              int64_t ldc, Isa isa) {
  if (!isaSupported(isa, cpuFeatures()))
    throw Error(std::string("int8Gemm: this CPU cannot run the ") + isaName(isa) + " kernel");
  if (m <= 0 || n <= 0) return;
  if (isa == Isa::Portable) return portable(m, n, k, a, lda, w, ldw, c, ldc);
  if (isa == Isa::Avx512Vnni) return int8_kernels::gemmAvx512Vnni(m, n, k, a, lda, w, ldw, c, ldc);

  int8_kernels::Int8Job job{.k = k, .a = reinterpret_cast<const uint8_t*>(a), .lda = lda, .w = w, .ldw = ldw, .c = c, .ldc = ldc};
  std::vector<uint8_t> shifted;
  std::vector<int32_t> weightSums;
  const bool vnni = isa != Isa::Avx2;
  if (vnni) {
    shifted.resize(static_cast<size_t>(m * k));
    core::parallelFor(m, 16, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t p = 0; p < k; ++p) shifted[static_cast<size_t>(i * k + p)] = static_cast<uint8_t>(a[i * lda + p]) ^ 0x80;
    });
    weightSums.resize(static_cast<size_t>(n));
    core::parallelFor(n, 16, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) {
        uint32_t sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += static_cast<uint32_t>(w[j * ldw + p]);
        weightSums[static_cast<size_t>(j)] = static_cast<int32_t>(sum * 128u);
      }
    });
    job.a = shifted.data();
    job.lda = k;
    job.weightSums = weightSums.data();
  }
  auto* block = vnni ? int8_kernels::blockAvxVnni : int8_kernels::blockAvx2;
  // Blocks ordered weight block first, so that a thread's run of blocks shares its weight rows.
  const int64_t weightRows = blockWeightRows(k);
  const int64_t rowBlocks = (m + kBlockRows - 1) / kBlockRows, weightBlocks = (n + weightRows - 1) / weightRows;
  core::parallelFor(rowBlocks * weightBlocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t i0 = b % rowBlocks * kBlockRows, j0 = b / rowBlocks * weightRows;
      block(job, i0, std::min(m, i0 + kBlockRows), j0, std::min(n, j0 + weightRows));
    }
  });
}

}  // namespace gizml::cpu
