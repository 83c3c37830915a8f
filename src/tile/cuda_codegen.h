#pragma once
// Pieces of the CUDA generator (src/tile/cuda_codegen*.cpp): the tensor-core path of `dot` and
// the cp.async pipeline of p.stages.
#include <string>

#include "tile/ir.h"

namespace gizml::tile::cudagen {

/// Where the registers of an mma.sync m16n8k16 result tile live: the block's warps as wr x wc,
/// each holding fm x fn fragments of 16 x 8 (4 f32 registers a thread per fragment). Register
/// e = ((i fn) + j) 4 + q of lane l in warp w is element
///   row = (w / wc) fm 16 + i 16 + l / 4 + (q / 2) 8,  col = (w % wc) fn 8 + j 8 + (l % 4) 2 + q % 2.
struct MmaLayout {
  int64_t rows = 0, cols = 0;
  int wr = 1, wc = 1, fm = 1, fn = 1;
  int64_t regs() const { return int64_t{fm} * fn * 4; }
  bool operator==(const MmaLayout&) const = default;
};

/// The tensor-core layout of a [rows, cols] product over `warps` warps, when one tiles it
/// exactly (rows a multiple of 16 per warp row, cols of 8 per warp column); false otherwise.
bool mmaLayout(int64_t rows, int64_t cols, int warps, MmaLayout& out);

/// The __device__ helpers of the tensor-core path (ldmatrix, mma.sync, cp.async; sm_80+),
/// include-guarded.
std::string mmaHelpers();

/// Halves of a padded [rows, cols] operand in shared memory: rows of cols + 8 halves, so that
/// ldmatrix's eight 16-byte rows fall in different banks.
inline int64_t pitchHalves(int64_t cols) { return cols + 8; }
inline int64_t paddedBytes(int64_t rows, int64_t cols) { return rows * pitchHalves(cols) * 2; }

/// The CUDA statements (one line each, no indentation) of the warp-level product
/// `acc[...] += A B` over K (a multiple of 16): A [m][K] at shared address expression `sa`, B
/// [K][n] at `sb`, both padded; `acc` is a register array in layout l; f16 chooses the
/// instruction's operand type (else bf16).
std::string mmaLoop(const MmaLayout& l, int64_t K, const std::string& sa, const std::string& sb, const std::string& acc,
                    bool f16);

/// The statements copying a [R, C] block of a 2-byte tensor (C a multiple of 8) into padded
/// shared memory at `dst` (an unsigned short* expression): 16-byte cp.async where the 8 elements
/// are inside the tensor, contiguous and aligned, else plain loads with zeros outside. `row0`
/// and `col0` are the block's first element; `tensor` the parameter's name.
std::string copyBlockAsync(const tir::Operand& o, const std::string& tensor, const std::string& row0,
                           const std::string& col0, const std::string& dst, int threads);

}  // namespace gizml::tile::cudagen
