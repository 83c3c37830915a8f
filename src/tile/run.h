#pragma once
// The backends behind Tile::run (src/tile/program.cpp): the CPU executor for host tensors, the
// generated CUDA kernel for GPU tensors.
#include <string>
#include <vector>

#include "tile/ir.h"

namespace gizml::tile {

/// Runs the traced kernel on host tensors (src/tile/cpu_executor.cpp).
void runOnCpu(const tir::Kernel& k);

/// Runs the traced kernel on the GPU its operands are on (src/tile/gpu_run.cpp): written host
/// tensors are first copied to that GPU (the kernel's operands are replaced by the copies).
void runOnGpu(tir::Kernel& k);

/// The CUDA kernel of a traced program for a GPU of compute capability `arch` (major * 10 + minor;
/// src/tile/cuda_codegen.cpp).
/// `tma`: pipelines on 9.0 may load through tensor maps (the launcher found the operands aligned).
CudaKernel generateCuda(const tir::Kernel& k, int arch, bool tma);

/// The generator's decisions for Tile::ir: the kernel, each value's register layout as text
/// (empty for index values) and each op's use of shared memory (empty: none).
struct CudaPlan {
  CudaKernel kernel;
  std::vector<std::string> valueLayouts, opNotes;
};
CudaPlan planCuda(const tir::Kernel& k, int arch);

}  // namespace gizml::tile
