// The fixed kernel sources, from kernels/*.cu.inc (raw string literals).
#include "gpu/codegen.h"
#include "gpu/cuda_expr.h"

namespace gizhw::gpu {

const std::string& preludeSource() {
  static const std::string source = elementwiseMathSource() +
#include "gpu/kernels/prelude.cu.inc"
      ;
  return source;
}

const std::string& fixedKernelSource() {
  static const std::string source = preludeSource() +
#include "gpu/kernels/reduce.cu.inc"
      + mmaSource() + std::string(
#include "gpu/kernels/matmul.cu.inc"
      ) + std::string(
#include "gpu/kernels/copy.cu.inc"
      );
  return source;
}

const std::string& netopsRowsKernelSource() {
  static const std::string source = preludeSource() +
#include "gpu/kernels/netops_rows.cu.inc"
      ;
  return source;
}

const std::string& mmaSource() {
  static const std::string source =
#include "gpu/kernels/mma.cu.inc"
      ;
  return source;
}

// netops' exp and log as text: netops/exp_log.inc is one source for the host and the GPU.
#define GZ_SHARED(...) #__VA_ARGS__
const std::string& netopsKernelSource() {
  static const std::string source = preludeSource() +
      "#define GZ_FN __device__ __forceinline__\n"
      "#define GZ_INF __uint_as_float(0x7f800000u)\n"
      "#define GZ_NAN_F __uint_as_float(0x7fc00000u)\n"
      "#define GZ_AS_FLOAT(u) __uint_as_float(u)\n"
      "#define GZ_AS_UINT(f) __float_as_uint(f)\n" +
      std::string(
#include "netops/exp_log.inc"
      ) + "\n" + std::string(
#include "gpu/kernels/netops.cu.inc"
      );
  return source;
}
#undef GZ_SHARED

}  // namespace gizhw::gpu
