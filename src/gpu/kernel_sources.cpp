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
      + std::string(
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

}  // namespace gizhw::gpu
