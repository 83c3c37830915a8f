// The fixed kernel sources, from kernels/*.cu.inc (raw string literals).
#include <gizml/error.h>

#include "tensor/gpu/codegen.h"
#include "tensor/gpu/cuda_expr.h"

namespace gizml::gpuops {

const std::string& preludeSource() {
  static const std::string source = elementwiseMathSource() +
#include "tensor/gpu/kernels/prelude.cu.inc"
      ;
  return source;
}

const std::string& fixedKernelSource() {
  static const std::string source = preludeSource() +
#include "tensor/gpu/kernels/reduce.cu.inc"
      + mmaSource() + std::string(
#include "tensor/gpu/kernels/matmul.cu.inc"
      ) + std::string(
#include "tensor/gpu/kernels/copy.cu.inc"
      );
  return source;
}

const std::string& mmaSource() {
  static const std::string source =
#include "tensor/gpu/kernels/mma.cu.inc"
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

}  // namespace gizml::gpuops
