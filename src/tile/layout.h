#pragma once
// Where a tile's values live on the GPU. Every tile of one shape has the same blocked layout, so
// elementwise operations on equal shapes need no data movement; a broadcast operand, a
// reduction's input and a product's operands go through shared memory.
#include <string>

#include "tile/ir.h"

namespace gizml::tile {

/// The tile seen as [rows, cols] (leading axes flattened, the last axis). Threads form a
/// threadRows x threadCols grid; thread t sits at row t / threadCols, column t % threadCols and
/// holds `vec` contiguous elements along cols, repeated rowRepeats x colRepeats times at the
/// thread grid's pitch. Register e of thread t is element
///   row = (e / (colRepeats vec)) threadRows + t / threadCols,
///   col = ((e / vec) % colRepeats threadCols + t % threadCols) vec + e % vec,
/// when both are inside the tile. Threads at or past threadRows x threadCols hold nothing.
struct Layout {
  int64_t rows = 1, cols = 1;
  int threads = 1;  // in the block
  int vec = 1, threadRows = 1, threadCols = 1;
  int64_t rowRepeats = 1, colRepeats = 1;
  int64_t regs() const { return rowRepeats * colRepeats * vec; }
  /// "threads 8x32 of 256, each 16x4"
  std::string text() const;
};

/// The blocked layout of a tile of `shape` over `threads` threads: vectors of 4 (or 2, 1)
/// along the last axis, threads across columns first so that a warp reads contiguous memory.
Layout blockedLayout(const Shape& shape, int threads);

/// Warps per block: one per 1024 elements of the largest tile, 1 to 8.
int warpsFor(const tir::Kernel& k);

/// What op passes through shared memory on the GPU, as Tile::ir says it (empty: nothing); a
/// tensor-core product's operands are the CUDA generator's to describe.
std::string stagingNote(const tir::Kernel& k, const tir::Op& op);

}  // namespace gizml::tile
