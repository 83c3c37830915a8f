// netops' GPU kernel sources, from kernels/*.cu.inc (raw string literals) after the tensor
// layer's prelude (src/tensor/gpu/kernel_sources.cpp).
#include "netops/kernel_sources.h"

#include "tensor/gpu/codegen.h"

namespace gizml::netops {

// netops' exp and log as text: netops/exp_log.inc is one source for the host and the GPU.
#define GZ_SHARED(...) #__VA_ARGS__
const std::string& netopsKernelSource() {
  static const std::string source = gpuops::preludeSource() +
      "#define GZ_FN __device__ __forceinline__\n"
      "#define GZ_INF __uint_as_float(0x7f800000u)\n"
      "#define GZ_NAN_F __uint_as_float(0x7fc00000u)\n"
      "#define GZ_AS_FLOAT(u) __uint_as_float(u)\n"
      "#define GZ_AS_UINT(f) __float_as_uint(f)\n" +
      std::string(
#include "netops/exp_log.inc"
      ) + "\n" + std::string(
#include "netops/kernels/netops.cu.inc"
      );
  return source;
}
#undef GZ_SHARED

const std::string& netopsRowsKernelSource() {
  static const std::string source = gpuops::preludeSource() +
#include "netops/kernels/netops_rows.cu.inc"
      ;
  return source;
}

const std::string& netopsNormKernelSource() {
  static const std::string source = netopsKernelSource() + std::string(
#include "netops/kernels/netops_norm.cu.inc"
  );
  return source;
}

const std::string& netopsAttentionRowsKernelSource() {
  static const std::string source = gpuops::preludeSource() + gpuops::mmaSource() +
#include "netops/kernels/netops_attention_rows.cu.inc"
      + std::string(
#include "netops/kernels/netops_attention8.cu.inc"
      );
  return source;
}

const std::string& netopsConvKernelSource() {
  static const std::string source = gpuops::preludeSource() + gpuops::mmaSource() +
#include "netops/kernels/netops_conv.cu.inc"
      ;
  return source;
}

const std::string& netopsW4a8GridKernelSource() {
  static const std::string source = gpuops::preludeSource() +
#include "netops/kernels/netops_w4a8_grid.cu.inc"
      ;
  return source;
}

}  // namespace gizml::netops
