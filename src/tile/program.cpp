// The public face of tracing: Program, Index, Tile, Reader and Writer forward to the Builder.
#include <gizml/tile.h>

#include <algorithm>
#include <array>

#include "tile/run.h"
#include "tile/tracer.h"

namespace gizml::tile {

using detail::Builder;
using tensor::BinaryOp;
using tensor::shapeText;
using tensor::UnaryOp;

int64_t cdiv(int64_t a, int64_t b) {
  check(b > 0, "Tile::cdiv: divisor " + std::to_string(b) + " is not positive");
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

namespace {

// Index arithmetic: numbers fold to numbers; otherwise the range of the result follows from the
// operands' ranges.
Index indexOp(tir::Kind kind, const Index& a, const Index& b) {
  Builder* builder = Builder::of(a) ? Builder::of(a) : Builder::of(b);
  const auto apply = [&](int64_t x, int64_t y) {
    return kind == tir::Kind::IndexAdd ? x + y : kind == tir::Kind::IndexSub ? x - y : x * y;
  };
  if (!builder) return Index(apply(Builder::number(a), Builder::number(b)));
  const int ia = builder->index(a, "index arithmetic"), ib = builder->index(b, "index arithmetic");
  const tir::Value &va = builder->value(ia), &vb = builder->value(ib);
  int64_t lo, hi;
  if (kind == tir::Kind::IndexSub) {
    lo = va.lo - vb.hi;
    hi = va.hi - vb.lo;
  } else {
    const std::array<int64_t, 4> c = {apply(va.lo, vb.lo), apply(va.lo, vb.hi), apply(va.hi, vb.lo),
                                      apply(va.hi, vb.hi)};
    lo = *std::min_element(c.begin(), c.end());
    hi = *std::max_element(c.begin(), c.end());
  }
  return builder->makeIndex(kind, {ia, ib}, lo, hi);
}

}  // namespace

Index Index::add(const Index& o) const { return indexOp(tir::Kind::IndexAdd, *this, o); }
Index Index::sub(const Index& o) const { return indexOp(tir::Kind::IndexSub, *this, o); }
Index Index::mul(const Index& o) const { return indexOp(tir::Kind::IndexMul, *this, o); }

Shape Tile::shape() const { return b_->value(id_).shape; }
DType Tile::dtype() const { return b_->value(id_).dtype; }
Tile Tile::k(double value) const { return b_->full(shape(), value, dtype()); }

#define GIZML_TILE_UNARY(method, op) \
  Tile Tile::method() const { return b_->unary(UnaryOp::op, *this); }
GIZML_TILE_UNARY(neg, Neg) GIZML_TILE_UNARY(abs, Abs) GIZML_TILE_UNARY(exp, Exp)
GIZML_TILE_UNARY(log, Log) GIZML_TILE_UNARY(sqrt, Sqrt) GIZML_TILE_UNARY(rsqrt, Rsqrt)
GIZML_TILE_UNARY(sin, Sin) GIZML_TILE_UNARY(cos, Cos) GIZML_TILE_UNARY(tanh, Tanh)
GIZML_TILE_UNARY(sigmoid, Sigmoid) GIZML_TILE_UNARY(relu, Relu) GIZML_TILE_UNARY(silu, Silu)
GIZML_TILE_UNARY(gelu, GeluErf) GIZML_TILE_UNARY(geluTanh, GeluTanh)
GIZML_TILE_UNARY(floor, Floor) GIZML_TILE_UNARY(ceil, Ceil) GIZML_TILE_UNARY(round, Round)
GIZML_TILE_UNARY(sign, Sign)
#undef GIZML_TILE_UNARY

#define GIZML_TILE_BINARY(method, op) \
  Tile Tile::method(const Tile& o) const { return b_->binary(BinaryOp::op, *this, o); }
GIZML_TILE_BINARY(add, Add) GIZML_TILE_BINARY(sub, Sub) GIZML_TILE_BINARY(mul, Mul)
GIZML_TILE_BINARY(div, Div) GIZML_TILE_BINARY(pow, Pow) GIZML_TILE_BINARY(min, Min)
GIZML_TILE_BINARY(max, Max) GIZML_TILE_BINARY(mod, Mod) GIZML_TILE_BINARY(eq, Eq)
GIZML_TILE_BINARY(ne, Ne) GIZML_TILE_BINARY(lt, Lt) GIZML_TILE_BINARY(le, Le)
GIZML_TILE_BINARY(gt, Gt) GIZML_TILE_BINARY(ge, Ge)
#undef GIZML_TILE_BINARY

Tile Tile::cast(DType dtype) const { return b_->cast(*this, dtype); }
Tile Tile::sum(int64_t axis) const { return b_->reduce(tir::Reduction::Sum, *this, axis); }
Tile Tile::max(int64_t axis) const { return b_->reduce(tir::Reduction::Max, *this, axis); }
Tile Tile::min(int64_t axis) const { return b_->reduce(tir::Reduction::Min, *this, axis); }
Tile Tile::dot(const Tile& o) const { return b_->dot(*this, o); }

Tile where(const Tile& condition, const Tile& a, const Tile& b) {
  return Builder::of(condition)->where(condition, a, b);
}

Tile Reader::at(const std::vector<Index>& index) const { return b_->load(operand_, index); }

Index Reader::blocks(int64_t axis) const {
  const tir::Operand& o = b_->kernel.operands[static_cast<size_t>(operand_)];
  const auto rank = static_cast<int64_t>(o.block.size());
  check(axis >= 0 && axis < rank, "tile blocks: axis " + std::to_string(axis) + " of a rank-" +
                                      std::to_string(rank) + " tensor");
  const int64_t n = cdiv(o.tensor.shape()[static_cast<size_t>(axis)], o.block[static_cast<size_t>(axis)]);
  return b_->makeIndex(tir::Kind::IndexConst, {}, n, n);
}

void Writer::put(const Tile& tile, const std::vector<Index>& index) const {
  b_->store(operand_, tile, index);
}

Index Program::id(int64_t axis) {
  const auto rank = static_cast<int64_t>(b_->kernel.grid.size());
  check(axis >= 0 && axis < rank, "tile id: axis " + std::to_string(axis) + " of grid " +
                                      shapeText(b_->kernel.grid));
  return b_->makeIndex(tir::Kind::ProgramId, {}, 0, b_->kernel.grid[static_cast<size_t>(axis)] - 1, axis);
}

Index Program::index(int64_t n) { return b_->makeIndex(tir::Kind::IndexConst, {}, n, n); }

Tile Program::zeros(const Shape& shape, DType dtype) { return b_->full(shape, 0.0, dtype); }

Tile Program::full(const Shape& shape, double value, DType dtype) {
  return b_->full(shape, value, dtype);
}

namespace {

std::string operandName(const std::vector<tir::Operand>& operands, size_t i) {
  const tir::Operand& o = operands[i];
  return std::string("t").append(std::to_string(i)) + " (" + (o.write ? "write " : "read ") +
         dtypeName(o.tensor.dtype()) + shapeText(o.tensor.shape()) + ")";
}

// A program runs on one device: the GPU of its GPU tensors, else the CPU. Every tensor it reads
// must be there; a host tensor it writes is copied to the GPU by Tile::run (src/tile/gpu_run.cpp).
void checkDevices(const std::vector<tir::Operand>& operands, int added) {
  const auto n = static_cast<size_t>(added);
  const tir::Operand& o = operands[n];
  for (size_t i = 0; i < n; ++i) {
    const tir::Operand& other = operands[i];
    const auto &mine = o.tensor.storage()->gpu(), &theirs = other.tensor.storage()->gpu();
    if (mine == theirs) continue;
    const bool bothGpu = mine && theirs;
    const tir::Operand& host = mine ? other : o;
    if (!bothGpu && host.write) continue;
    throw Error("Tile::run: " + operandName(operands, n) + " is on " + o.tensor.device() + " but " +
                operandName(operands, i) + " is on " + other.tensor.device() +
                (bothGpu ? ": a program runs on one GPU" : ": a program on a GPU reads only tensors on that GPU") +
                " (move one with on(gpu) or host())");
  }
}

// A read or write's tensor and block shape, checked: one positive length per axis.
int addOperand(Builder& b, const Tensor& t, const Shape& block, double fill, bool write) {
  const char* op = write ? "tile write" : "tile read";
  const DType d = t.dtype();
  check((isFloat(d) && d != DType::F64) || d == DType::Bool, std::string(op) + " of a " + dtypeName(d) + shapeText(t.shape()) +
                                            " tensor: tiles hold f32, f16, bf16 or bool");
  check(block.size() == t.shape().size(),
        std::string(op) + " of " + dtypeName(d) + shapeText(t.shape()) + ": blocks " +
            shapeText(block) + " need one length per axis");
  for (int64_t n : block)
    check(n > 0, std::string(op) + " of " + dtypeName(d) + shapeText(t.shape()) + ": blocks " +
                     shapeText(block) + " have an empty axis");
  tir::Operand o;
  o.tensor = t;
  o.block = block;
  o.fill = d == DType::Bool ? (fill != 0.0 ? 1.0 : 0.0) : doubleToWorkingF32(fill, d);
  o.write = write;
  b.kernel.operands.push_back(std::move(o));
  const auto added = static_cast<int>(b.kernel.operands.size()) - 1;
  checkDevices(b.kernel.operands, added);
  return added;
}
}  // namespace

Reader Program::read(const Tensor& t, const Shape& block, double fill) {
  return b_->reader(addOperand(*b_, t, block, fill, false));
}

Writer Program::write(const Tensor& t, const Shape& block) {
  return b_->writer(addOperand(*b_, t, block, 0.0, true));
}

Tile Program::fold(const Index& start, const Index& count, const Tile& init,
                   const std::function<Tile(Index, Tile)>& body) {
  return b_->fold(start, count, init, body);
}

void Program::stages(int n) {
  check(n >= 1 && n <= 4, "tile stages: " + std::to_string(n) + " is not 1 to 4");
  b_->kernel.stages = n;
}

std::vector<Tensor> run(const Grid& grid, const Body& body) {
  tir::Kernel k = trace(grid, body);
  const bool onGpu = std::any_of(k.operands.begin(), k.operands.end(),
                                 [](const tir::Operand& o) { return o.tensor.onGpu(); });
  if (onGpu) runOnGpu(k);
  else runOnCpu(k);
  std::vector<Tensor> written;
  for (const tir::Operand& o : k.operands)
    if (o.write) written.push_back(o.tensor);
  return written;
}

}  // namespace gizml::tile
