// Tracing: every operation is checked here, once, so that the executors can trust the IR. Errors
// name the operation and the shapes involved.
#include "tile/tracer.h"

#include <algorithm>

namespace gizml::tile::detail {
namespace {

using tensor::shapeText;

bool isTileDType(DType t) { return (isFloat(t) && t != DType::F64) || t == DType::Bool; }  // no f64 in tiles

// Comparisons give Bool; arithmetic on two Bools counts them as 0 and 1 in F32 (tiles hold no
// integers).
DType binaryType(tensor::BinaryOp op, DType a, DType b) {
  using tensor::BinaryOp;
  switch (op) {
    case BinaryOp::Eq: case BinaryOp::Ne: case BinaryOp::Lt: case BinaryOp::Le:
    case BinaryOp::Gt: case BinaryOp::Ge:
      return DType::Bool;
    default: {
      const DType t = promoteTypes(a, b);
      return t == DType::Bool ? DType::F32 : t;
    }
  }
}

// NumPy broadcasting of tile shapes, or an Error naming the operation and both shapes.
Shape broadcast(const char* op, const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    check(x == y || x == 1 || y == 1, std::string("tile ") + op + ": shapes " + shapeText(a) +
                                          " and " + shapeText(b) + " do not broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

std::string operandText(const tir::Operand& o) {
  return std::string(dtypeName(o.tensor.dtype())) + shapeText(o.tensor.shape()) + " in blocks " +
         shapeText(o.block);
}

}  // namespace

Builder::Builder(const Grid& grid) {
  check(!grid.empty(), "Tile::run: the grid needs at least one axis");
  for (int64_t g : grid)
    check(g >= 0, "Tile::run: grid " + shapeText(grid) + " has a negative length");
  kernel.grid = grid;
}

int Builder::addValue(tir::Value v) {
  v.region = openFolds_.empty() ? -1 : openFolds_.back();
  kernel.values.push_back(std::move(v));
  return static_cast<int>(kernel.values.size()) - 1;
}

int Builder::index(const Index& i, const char* op) {
  if (isNumber(i)) return makeIndex(tir::Kind::IndexConst, {}, i.value_, i.value_).id_;
  check(i.b_ == this, std::string("tile ") + op + ": an index of another program");
  const int region = value(i.id_).region;
  check(region < 0 || std::find(openFolds_.begin(), openFolds_.end(), region) != openFolds_.end(),
        std::string("tile ") + op + ": an index from a finished fold's body");
  return i.id_;
}

int Builder::tile(const Tile& t, const char* op) {
  check(t.b_ == this, std::string("tile ") + op + ": a tile of another program");
  const int region = value(t.id_).region;
  check(region < 0 || std::find(openFolds_.begin(), openFolds_.end(), region) != openFolds_.end(),
        std::string("tile ") + op + ": a tile from a finished fold's body");
  return t.id_;
}

Index Builder::makeIndex(tir::Kind kind, std::vector<int> args, int64_t lo, int64_t hi, int64_t axis) {
  tir::Value v;
  v.index = true;
  v.lo = lo;
  v.hi = hi;
  tir::Op op{kind};
  op.result = addValue(std::move(v));
  op.args = std::move(args);
  op.axis = axis;
  kernel.ops.push_back(op);
  return Index(this, op.result);
}

Tile Builder::makeTile(tir::Op op, const Shape& shape, DType dtype) {
  tir::Value v;
  v.shape = shape;
  v.dtype = dtype;
  op.result = addValue(std::move(v));
  kernel.ops.push_back(op);
  return Tile(this, op.result);
}

Tile Builder::full(const Shape& shape, double value, DType dtype) {
  check(isTileDType(dtype), std::string("tile full: tiles hold f32, f16, bf16 or bool, not ") +
                                dtypeName(dtype));
  for (int64_t n : shape)
    check(n > 0, "tile full: shape " + shapeText(shape) + " has an empty axis");
  tir::Op op{tir::Kind::Full};
  op.value = dtype == DType::Bool ? (value != 0.0 ? 1.0 : 0.0) : doubleToWorkingF32(value, dtype);
  return makeTile(op, shape, dtype);
}

Tile Builder::unary(tensor::UnaryOp u, const Tile& x) {
  const char* name = tensor::opName(u);
  tir::Op op{tir::Kind::Unary};
  op.unary = u;
  op.args = {tile(x, name)};
  const tir::Value& v = value(op.args[0]);
  return makeTile(op, v.shape, v.dtype == DType::Bool ? DType::F32 : v.dtype);
}

Tile Builder::binary(tensor::BinaryOp b, const Tile& x, const Tile& y) {
  const char* name = tensor::opName(b);
  tir::Op op{tir::Kind::Binary};
  op.binary = b;
  op.args = {tile(x, name), tile(y, name)};
  const tir::Value &vx = value(op.args[0]), &vy = value(op.args[1]);
  return makeTile(op, broadcast(name, vx.shape, vy.shape), binaryType(b, vx.dtype, vy.dtype));
}

Tile Builder::where(const Tile& c, const Tile& a, const Tile& b) {
  tir::Op op{tir::Kind::Where};
  op.args = {tile(c, "where"), tile(a, "where"), tile(b, "where")};
  const tir::Value &vc = value(op.args[0]), &va = value(op.args[1]), &vb = value(op.args[2]);
  const Shape shape = broadcast("where", broadcast("where", vc.shape, va.shape), vb.shape);
  return makeTile(op, shape, promoteTypes(va.dtype, vb.dtype));
}

Tile Builder::cast(const Tile& x, DType dtype) {
  check(isTileDType(dtype), std::string("tile cast: tiles hold f32, f16, bf16 or bool, not ") +
                                dtypeName(dtype));
  tir::Op op{tir::Kind::Cast};
  op.args = {tile(x, "cast")};
  return makeTile(op, value(op.args[0]).shape, dtype);
}

Tile Builder::reduce(tir::Reduction r, const Tile& x, int64_t axis) {
  const char* name = tir::reductionName(r);
  tir::Op op{tir::Kind::Reduce};
  op.reduction = r;
  op.args = {tile(x, name)};
  const tir::Value& v = value(op.args[0]);
  const auto rank = static_cast<int64_t>(v.shape.size());
  check(axis >= -rank && axis < rank, std::string("tile ") + name + ": axis " +
                                          std::to_string(axis) + " of a " + shapeText(v.shape) +
                                          " tile");
  op.axis = axis < 0 ? axis + rank : axis;
  Shape shape = v.shape;
  shape[static_cast<size_t>(op.axis)] = 1;
  const DType dtype = r == tir::Reduction::Sum && v.dtype == DType::Bool ? DType::F32 : v.dtype;
  return makeTile(op, shape, dtype);
}

Tile Builder::dot(const Tile& a, const Tile& b) {
  tir::Op op{tir::Kind::Dot};
  op.args = {tile(a, "dot"), tile(b, "dot")};
  const Shape &sa = value(op.args[0]).shape, &sb = value(op.args[1]).shape;
  check(sa.size() == 2 && sb.size() == 2 && sa[1] == sb[0],
        "tile dot: " + shapeText(sa) + " and " + shapeText(sb) +
            " are not [m, k] and [k, n] tiles");
  return makeTile(op, {sa[0], sb[1]}, DType::F32);
}

// The block index of a read or write as index values, checked against the operand: one per
// axis, and within the tensor's blocks for every value the tracer can prove it takes.
std::vector<int> Builder::blockIndex(int operand, const std::vector<Index>& index, const char* op) {
  const tir::Operand& o = kernel.operands[static_cast<size_t>(operand)];
  check(index.size() == o.block.size(),
        std::string("tile ") + op + " of " + operandText(o) + ": block index of " +
            std::to_string(index.size()) + " axes, the tensor has " +
            std::to_string(o.block.size()));
  std::vector<int> ids;
  for (size_t a = 0; a < index.size(); ++a) {
    const int id = this->index(index[a], op);
    const tir::Value& v = value(id);
    const int64_t blocks = cdiv(o.tensor.shape()[a], o.block[a]);
    check(v.lo > v.hi || (v.lo >= 0 && v.hi < blocks),
          std::string("tile ") + op + " of " + operandText(o) + ": block index " +
              std::to_string(v.lo) + (v.lo == v.hi ? "" : ".." + std::to_string(v.hi)) +
              " on axis " + std::to_string(a) + " is past its " + std::to_string(blocks) +
              " block" + (blocks == 1 ? "" : "s"));
    ids.push_back(id);
  }
  return ids;
}

Tile Builder::load(int operand, const std::vector<Index>& index) {
  tir::Op op{tir::Kind::Load};
  op.operand = operand;
  op.args = blockIndex(operand, index, "read");
  const tir::Operand& o = kernel.operands[static_cast<size_t>(operand)];
  return makeTile(op, o.block, o.tensor.dtype());
}

void Builder::store(int operand, const Tile& t, const std::vector<Index>& index) {
  tir::Operand& o = kernel.operands[static_cast<size_t>(operand)];
  tir::Op op{tir::Kind::Store};
  op.operand = operand;
  op.args = {tile(t, "put")};
  const Shape& shape = value(op.args[0]).shape;
  check(shape == o.block, "tile put: a " + shapeText(shape) + " tile into " + operandText(o));
  const std::vector<int> ids = blockIndex(operand, index, "put");
  op.args.insert(op.args.end(), ids.begin(), ids.end());
  o.put = true;
  kernel.ops.push_back(op);
}

Tile Builder::fold(const Index& start, const Index& count, const Tile& init,
                   const std::function<Tile(Index, Tile)>& body) {
  tir::Op begin{tir::Kind::FoldBegin};
  begin.args = {index(start, "fold"), index(count, "fold"), tile(init, "fold")};
  const tir::Value &vs = value(begin.args[0]), &vc = value(begin.args[1]);
  const tir::Value vi = value(begin.args[2]);
  const auto beginAt = static_cast<int>(kernel.ops.size());
  openFolds_.push_back(beginAt);
  tir::Value counter;
  counter.index = true;
  counter.lo = vs.lo;
  counter.hi = vs.hi + vc.hi - 1;
  begin.result = addValue(counter);
  begin.result2 = addValue(vi);
  kernel.ops.push_back(begin);

  const Tile next = body(Index(this, begin.result), Tile(this, begin.result2));
  tir::Op end{tir::Kind::FoldEnd};
  end.args = {tile(next, "fold")};
  const tir::Value& vn = value(end.args[0]);
  check(vn.shape == vi.shape && vn.dtype == vi.dtype,
        "tile fold: the body gives " + tir::typeText(vn) + " for an accumulator of " +
            tir::typeText(vi));
  openFolds_.pop_back();
  end.result = addValue(vi);
  end.match = beginAt;
  kernel.ops[static_cast<size_t>(beginAt)].match = static_cast<int>(kernel.ops.size());
  kernel.ops.push_back(end);
  return Tile(this, end.result);
}

}  // namespace gizml::tile::detail

namespace gizml::tile {

tir::Kernel trace(const Grid& grid, const Body& body) {
  detail::Builder b(grid);
  Program p = b.program();
  body(p);
  for (const tir::Operand& o : b.kernel.operands)
    check(!o.write || o.put, "tile write of " + std::string(dtypeName(o.tensor.dtype())) +
                                 tensor::shapeText(o.tensor.shape()) + " in blocks " +
                                 tensor::shapeText(o.block) + ": no put stores to it");
  tir::fuseDotAccumulate(b.kernel);
  return std::move(b.kernel);
}

}  // namespace gizml::tile
