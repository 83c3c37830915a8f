// Names and small passes over the tile IR.
#include "tile/ir.h"

namespace gizml::tile::tir {

const char* kindName(Kind kind) {
  switch (kind) {
    case Kind::ProgramId: return "id";
    case Kind::IndexConst: return "index";
    case Kind::IndexAdd: return "add";
    case Kind::IndexSub: return "sub";
    case Kind::IndexMul: return "mul";
    case Kind::Full: return "full";
    case Kind::Load: return "load";
    case Kind::Store: return "store";
    case Kind::Unary: return "unary";
    case Kind::Binary: return "binary";
    case Kind::Where: return "where";
    case Kind::Cast: return "cast";
    case Kind::Reduce: return "reduce";
    case Kind::Dot: return "dot";
    case Kind::FoldBegin: return "fold";
    case Kind::FoldEnd: return "yield";
  }
  return "?";
}

const char* reductionName(Reduction r) {
  switch (r) {
    case Reduction::Sum: return "sum";
    case Reduction::Max: return "max";
    case Reduction::Min: return "min";
  }
  return "?";
}

std::string typeText(const Value& v) {
  return v.index ? "index" : dtypeName(v.dtype) + tensor::shapeText(v.shape);
}

int64_t elementCount(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t gridPoints(const Grid& grid) { return elementCount(grid); }

void fuseDotAccumulate(Kernel& k) {
  std::vector<int> uses(k.values.size(), 0), definedBy(k.values.size(), -1);
  for (size_t i = 0; i < k.ops.size(); ++i) {
    for (int a : k.ops[i].args) ++uses[static_cast<size_t>(a)];
    if (k.ops[i].result >= 0) definedBy[static_cast<size_t>(k.ops[i].result)] = static_cast<int>(i);
  }
  std::vector<bool> removed(k.ops.size(), false);
  for (Op& op : k.ops) {
    if (op.kind != Kind::Binary || op.binary != tensor::BinaryOp::Add) continue;
    for (int side = 0; side < 2; ++side) {
      const int product = op.args[static_cast<size_t>(side)], acc = op.args[static_cast<size_t>(1 - side)];
      const int at = definedBy[static_cast<size_t>(product)];
      if (at < 0 || removed[static_cast<size_t>(at)]) continue;
      Op& dot = k.ops[static_cast<size_t>(at)];
      const Value &vp = k.values[static_cast<size_t>(product)], &va = k.values[static_cast<size_t>(acc)];
      // Only a same-shaped f32 accumulator in the same loop body: moving the product into a
      // deeper loop would repeat it.
      if (dot.kind != Kind::Dot || dot.args.size() != 2 || uses[static_cast<size_t>(product)] != 1 ||
          va.shape != vp.shape || va.dtype != DType::F32 ||
          k.values[static_cast<size_t>(op.result)].region != vp.region)
        continue;
      op.kind = Kind::Dot;
      op.args = {dot.args[0], dot.args[1], acc};
      removed[static_cast<size_t>(at)] = true;
      break;
    }
  }
  std::vector<Op> kept;
  std::vector<int> open, newIndex(k.ops.size(), -1);
  for (size_t i = 0; i < k.ops.size(); ++i) {
    if (removed[i]) continue;
    kept.push_back(k.ops[i]);
    const int at = static_cast<int>(kept.size()) - 1;
    newIndex[i] = at;
    if (kept.back().kind == Kind::FoldBegin) open.push_back(at);
    if (kept.back().kind == Kind::FoldEnd) {
      kept.back().match = open.back();
      kept[static_cast<size_t>(open.back())].match = at;
      open.pop_back();
    }
  }
  k.ops = std::move(kept);
  for (Value& v : k.values)
    if (v.region >= 0) v.region = newIndex[static_cast<size_t>(v.region)];
}

}  // namespace gizml::tile::tir
