// The fixed kernel sources, from kernels/*.cu.inc (raw string literals).
#include <gizml/error.h>

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

std::string wgmmaSource(int n, bool f16) {
  if (n < 8 || n > 256 || n % 8 != 0)
    throw gizml::Error("wgmmaSource: N must be a multiple of 8 in [8, 256], not " + std::to_string(n));
  const int regs = n / 2;
  const std::string type = f16 ? "f16" : "bf16", N = std::to_string(n);
  std::string list, outs;
  for (int r = 0; r < regs; ++r) {
    list += (r ? ", %" : "%") + std::to_string(r);
    outs += std::string(r ? ", " : "") + "\"+f\"(d[" + std::to_string(r) + "])";
  }
  const std::string guard = "GIZML_WGMMA_" + N + "_" + type;
  // The emulator (GIZML_EMU) defines the template for every N itself.
  return "#if defined(GIZML_HAVE_WGMMA) && !defined(GIZML_EMU) && !defined(" + guard + ")\n#define " + guard +
         "\ntemplate <>\n__device__ __forceinline__ void gz_wgmma<" + N + ", " + (f16 ? "true" : "false") +
         ">(float* d, unsigned long long a, unsigned long long b, int scaleD) {\n"
         "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + std::to_string(regs + 2) +
         ", 0;\\nwgmma.mma_async.sync.aligned.m64n" + N + "k16.f32." + type + "." + type + " {" + list + "}, %" +
         std::to_string(regs) + ", %" + std::to_string(regs + 1) + ", p, 1, 1, 0, 1;\\n}\\n\"\n"
         "               : " + outs + "\n               : \"l\"(a), \"l\"(b), \"r\"(scaleD));\n}\n#endif\n";
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
