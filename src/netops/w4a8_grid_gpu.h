#pragma once
// netops::w4a8Grid on a GPU (w4a8_grid.cpp checks the operands and calls this).
#include <gizml/netops.h>  // netops::Tensor

namespace gizml::netops::w4a8gpu {


/// out [rows, 2 packed.size(1)] I8 = clamp(rint(levels[code] * scales[row, column / group]),
/// -127, 127), code the column's nibble of packed [rows, in / 2] I8 (even column low): every
/// operand contiguous on one GPU, scales [rows, in / group] F32, levels [16] F32.
void w4a8Grid(const Tensor& packed, const Tensor& scales, const Tensor& levels, int64_t group, const Tensor& out);

}  // namespace gizml::netops::w4a8gpu
