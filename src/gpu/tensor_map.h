#pragma once
// Tensor maps for Hopper's TMA copies (cp.async.bulk.tensor; the kernels' gz_tma_load_2d in
// kernels/mma.cu.inc): the 128-byte CUtensorMap the driver's cuTensorMapEncodeTiled fills, which
// a kernel reads from global memory (the host copies it there before the launch).
#include <gizhw/gpu.h>

#include <array>
#include <cstdint>

namespace gizhw::gpu {

/// The tensor map of a row-major 2-D tensor of 2-byte elements (the bits are copied, whatever
/// they encode) at device `address`: `rows` x `cols`, rows `rowStrideBytes` apart, read in boxes
/// of boxRows x boxCols, laid out in shared memory with a swizzle of swizzleBytes (0, 32, 64 or
/// 128; wgmma's modes). Elements outside the tensor read as zeros. Throws an Error naming the
/// argument the driver would refuse (address 16-byte aligned, the row stride a multiple of 16
/// below 2^40, box dimensions in [1, 256] with boxCols * 2 a multiple of 16 and at most the
/// swizzle's bytes, ...), and when the GPU has no TMA (compute capability below 9.0, AMD, a
/// driver without cuTensorMapEncodeTiled).
/// Whether gpu can make tensor maps (NVIDIA, compute capability 9.0 or more, a driver with
/// cuTensorMapEncodeTiled).
bool hasTensorMaps(const Gpu& gpu);

std::array<unsigned char, 128> tensorMap2d(const Gpu& gpu, uint64_t address, uint64_t rows, uint64_t cols,
                                           uint64_t rowStrideBytes, uint32_t boxRows, uint32_t boxCols,
                                           int swizzleBytes);

}  // namespace gizhw::gpu
