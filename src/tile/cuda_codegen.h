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
///
/// A wgmma layout (Hopper) has wc = 1 and row = (w / 4) fm 64 + i 64 + (w % 4) 16 + l / 4 + (q / 2) 8
/// instead: warpgroup w / 4 holds fm slabs of 64 rows, each an m64nNk16 result with N = cols.
struct MmaLayout {
  int64_t rows = 0, cols = 0;
  int wr = 1, wc = 1, fm = 1, fn = 1;
  bool wgmma = false;
  int64_t regs() const { return int64_t{fm} * fn * 4; }
  bool operator==(const MmaLayout&) const = default;
};

/// The tensor-core layout of a [rows, cols] product over `warps` warps, when one tiles it
/// exactly (rows a multiple of 16 per warp row, cols of 8 per warp column); false otherwise.
bool mmaLayout(int64_t rows, int64_t cols, int warps, MmaLayout& out);

/// The wgmma layout of a [rows, cols] product over `warps` warps: whole warpgroups, rows a multiple
/// of 64 a warpgroup, cols a multiple of 16 up to 256 (one instruction spans them); false otherwise.
bool wgmmaLayout(int64_t rows, int64_t cols, int warps, MmaLayout& out);

/// The __device__ helpers of the tensor-core path (ldmatrix, mma.sync, cp.async; sm_80+),
/// include-guarded.
std::string mmaHelpers();

/// How a [rows, cols] block of 2-byte values (cols a multiple of 8) lies in shared memory: column
/// panels of `chunks` 16-byte chunks a row (the largest power of two up to 8 dividing cols / 8),
/// panel after panel, and in each the chunks of a row XOR-swizzled by the row's address bits
/// (gz_swz in mmaHelpers). ldmatrix's eight row addresses of one chunk column then fall in eight
/// different bank groups, and a panel is wgmma's 128-, 64- or 32-byte swizzle atom for 8, 4 or 2
/// chunks (no swizzle for 1).
struct SharedBlock {
  int64_t rows = 0, cols = 0;
  int chunks = 1;
  /// The bytes it takes, rounded up to 1024 so that the next block starts on an atom boundary.
  int64_t bytes() const { return (rows * cols * 2 + 1023) / 1024 * 1024; }
  int64_t panelBytes() const { return rows * chunks * 16; }
  /// gz_swz's arguments after the row and the chunk.
  std::string swizzleArgs() const { return std::to_string(rows) + ", " + std::to_string(chunks); }
};
SharedBlock sharedBlock(int64_t rows, int64_t cols);

/// The CUDA statements (one line each, no indentation) of the warp-level product
/// `acc[...] += A B` over K (a multiple of 16): A [m][K] at shared address expression `sa`, B
/// [K][n] at `sb`, both laid out as sharedBlock says; `acc` is a register array in layout l; f16 chooses the
/// instruction's operand type (else bf16).
std::string mmaLoop(const MmaLayout& l, int64_t K, const std::string& sa, const std::string& sb, const std::string& acc,
                    bool f16);

/// As mmaLoop, on Hopper's warpgroup instructions (sm_90a): for each k step of 16 and slab of 64
/// rows one gz_wgmma reading A (K-major) and B (N-major) from shared memory through descriptors of
/// their swizzle atoms; then waits for them. The caller has fenced the operands' stores for the
/// async proxy (gz_fence_proxy_async) before the barrier that publishes them.
std::string wgmmaLoop(const MmaLayout& l, int64_t K, const std::string& sa, const std::string& sb, const std::string& acc,
                      bool f16);

/// The statements copying a [R, C] block of a 2-byte tensor (C a multiple of 8) into shared
/// memory at `dst` (an unsigned char* expression) as sharedBlock(R, C) lays it out: 16-byte cp.async where the 8 elements
/// are inside the tensor, contiguous and aligned, else plain loads with zeros outside. `row0`
/// and `col0` are the block's first element; `tensor` the parameter's name.
std::string copyBlockAsync(const tir::Operand& o, const std::string& tensor, const std::string& row0,
                           const std::string& col0, const std::string& dst, int threads);

}  // namespace gizml::tile::cudagen
