#pragma once
// The tracer behind Program, Tile, Index, Reader and Writer: each call appends checked
// operations to a kernel's IR.
#include <string>
#include <vector>

#include "tile/ir.h"

namespace gizml::tile::detail {

class Builder {
 public:
  explicit Builder(const Grid& grid);

  tir::Kernel kernel;

  Program program() { return Program(this); }

  // Operands of operations: a value of this trace, checked to be in scope.
  int index(const Index& i, const char* op);
  int tile(const Tile& t, const char* op);
  const tir::Value& value(int id) const { return kernel.values[static_cast<size_t>(id)]; }

  Index makeIndex(tir::Kind kind, std::vector<int> args, int64_t lo, int64_t hi, int64_t axis = 0);
  Tile makeTile(tir::Op op, const Shape& shape, DType dtype);
  Tile full(const Shape& shape, double value, DType dtype);
  Tile unary(tensor::UnaryOp op, const Tile& x);
  Tile binary(tensor::BinaryOp op, const Tile& a, const Tile& b);
  Tile where(const Tile& c, const Tile& a, const Tile& b);
  Tile cast(const Tile& x, DType dtype);
  Tile reduce(tir::Reduction r, const Tile& x, int64_t axis);
  Tile dot(const Tile& a, const Tile& b);
  Tile load(int operand, const std::vector<Index>& index);
  void store(int operand, const Tile& t, const std::vector<Index>& index);
  Tile fold(const Index& start, const Index& count, const Tile& init,
            const std::function<Tile(Index, Tile)>& body);

  Reader reader(int operand) { return Reader(this, operand); }
  Writer writer(int operand) { return Writer(this, operand); }
  Tile tileOf(int id) { return Tile(this, id); }
  Index indexOf(int id) { return Index(this, id); }
  /// Whether an Index is a plain number (not yet a value), and that number.
  static bool isNumber(const Index& i) { return i.b_ == nullptr; }
  static int64_t number(const Index& i) { return i.value_; }
  static detail::Builder* of(const Tile& t) { return t.b_; }
  static detail::Builder* of(const Index& i) { return i.b_; }

 private:
  int addValue(tir::Value v);
  std::vector<int> blockIndex(int operand, const std::vector<Index>& index, const char* op);
  std::vector<int> openFolds_;  // FoldBegin ops whose bodies are being traced
};

}  // namespace gizml::tile::detail
