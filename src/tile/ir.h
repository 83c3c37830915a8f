#pragma once
// The tile IR: a flat SSA list of operations on values (tiles with a shape and dtype, or i64
// indices). A fold's body sits between its FoldBegin and FoldEnd, so every backend walks one
// list: the CPU executor jumps back, the CUDA generator opens a loop.
#include <gizml/tile.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gizml::tile::tir {

enum class Kind : uint8_t {
  ProgramId,  // index: the grid point's coordinate on `axis`
  IndexConst, // index: the value held in the result's range
  IndexAdd, IndexSub, IndexMul,
  Full,       // tile of `value`
  Load,       // tile: block args[...] of operand
  Store,      // args[0] (a tile) into block args[1...] of operand
  Unary, Binary, Where, Cast,
  Reduce,     // along axis, keeping it with length 1
  Dot,        // args[0] [m, k] x args[1] [k, n], plus args[2] when present
  FoldBegin,  // args: start, count, init; result: the counter, result2: the accumulator
  FoldEnd,    // args: the body's new accumulator; result: the fold's value
};

enum class Reduction : uint8_t { Sum, Max, Min };

struct Value {
  bool index = false;
  Shape shape;               // tiles
  DType dtype = DType::F32;  // tiles
  int64_t lo = 0, hi = 0;    // indices: the range tracing proves (lo > hi: never computed)
  int region = -1;           // the FoldBegin op whose body defines it, -1 outside folds
};

struct Op {
  explicit Op(Kind k) : kind(k) {}
  Kind kind;
  int result = -1;
  int result2 = -1;
  std::vector<int> args;
  tensor::UnaryOp unary{};
  tensor::BinaryOp binary{};
  Reduction reduction{};
  int64_t axis = 0;   // ProgramId, Reduce
  double value = 0;   // Full (already exact in the dtype)
  int operand = -1;   // Load, Store
  int match = -1;     // FoldBegin <-> FoldEnd
};

/// A tensor the program reads or writes, in blocks.
struct Operand {
  Tensor tensor;
  Shape block;
  double fill = 0;  // reads: the value outside the tensor
  bool write = false;
  bool put = false;  // writes: whether any put stores to it
};

struct Kernel {
  Grid grid;
  std::vector<Value> values;
  std::vector<Op> ops;
  std::vector<Operand> operands;
  int stages = 1;
};

const char* kindName(Kind kind);
const char* reductionName(Reduction r);
/// "f32[4, 4]" for a tile, "index" for an index.
std::string typeText(const Value& v);
int64_t elementCount(const Shape& shape);
int64_t gridPoints(const Grid& grid);

/// Rewrites `add(c, dot(a, b))` into `dot(a, b, c)` where the product has no other use, so
/// that backends accumulate into c (sgemm's accumulate, the tensor core's C operand).
void fuseDotAccumulate(Kernel& k);

}  // namespace gizml::tile::tir

namespace gizml::tile {
/// Traces body into a kernel, checking every operation (gizml::Error names the operation and
/// shapes), then fuses products into their accumulators.
tir::Kernel trace(const Grid& grid, const Body& body);
}  // namespace gizml::tile
