#pragma once
// netops' GPU kernel sources (src/netops/kernels/*.cu.inc), each after the tensor layer's prelude
// (src/tensor/gpu/codegen.h); the launches are in the *_gpu.cpp files beside them.
#include <string>

namespace gizml::netops {

/// Attention, cross entropy rows, layer norm and dropout (kernels/netops.cu.inc), with the exp and
/// log the host uses (exp_log.inc).
const std::string& netopsKernelSource();
/// The language-model step (kernels/netops_rows.cu.inc).
const std::string& netopsRowsKernelSource();
/// The norms, ConvRot INT8 rows and groupNorm (kernels/netops_norm.cu.inc) after netopsKernelSource().
const std::string& netopsNormKernelSource();
/// Attention over packed BF16 rows (kernels/netops_attention_rows.cu.inc, its 8-bit path in
/// netops_attention8.cu.inc) with the tensor-core wrappers.
const std::string& netopsAttentionRowsKernelSource();
/// Convolution and pooling (kernels/netops_conv.cu.inc) with the tensor-core wrappers.
const std::string& netopsConvKernelSource();
/// The INT8 grid of 4-bit W4A8 weights (kernels/netops_w4a8_grid.cu.inc).
const std::string& netopsW4a8GridKernelSource();

}  // namespace gizml::netops
