#pragma once
// While one lives, the calling thread's float arithmetic flushes denormal results and inputs to
// zero (x86: MXCSR's FTZ and DAZ bits, restored after; elsewhere nothing changes). For kernels
// whose values decay through the denormal range, where every operation on a denormal takes a
// microcode assist: Qwen 3.5's chunked delta rule, whose decays and states fall below 1e-38, ran
// 3.4x slower for them. What is flushed is below 1.2e-38, beside values of order 1e-3 and more.
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace gizml::cpu {

class FlushDenormals {
 public:
#if defined(__x86_64__) || defined(__i386__)
  FlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kFlushToZero | kDenormalsAreZero); }
  ~FlushDenormals() { _mm_setcsr(saved_); }
#else
  FlushDenormals() = default;
#endif
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

 private:
#if defined(__x86_64__) || defined(__i386__)
  static constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;
  unsigned saved_;
#endif
};

}  // namespace gizml::cpu
