// int8Gemm (int8_gemm.h): the portable loop, or the chosen ISA's kernel.
#include "cpu/int8_gemm.h"

#include <gizml/error.h>

#include <climits>
#include <string>

#include "core/thread_pool.h"

namespace gizml::cpu {

namespace {

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
  // The kernels gather a panel's rows by 32-bit offsets: rows further apart take the portable loop.
  if (isa == Isa::Portable || ldw > INT32_MAX / 16) return portable(m, n, k, a, lda, w, ldw, c, ldc);
  if (isa == Isa::Avx512Vnni) return int8_kernels::gemmAvx512Vnni(m, n, k, a, lda, w, ldw, c, ldc);
  if (isa == Isa::AvxVnni) return int8_kernels::gemmAvxVnni(m, n, k, a, lda, w, ldw, c, ldc);
  int8_kernels::gemmAvx2(m, n, k, a, lda, w, ldw, c, ldc);
}

}  // namespace gizml::cpu
