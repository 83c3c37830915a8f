// Tile::ir: the traced program as text, one operation a line, with each value's type and GPU
// layout, for a person to read.
#include <gizml/tile.h>

#include <algorithm>

#include "tile/run.h"

namespace gizml::tile {
namespace {

using tensor::shapeText;

// Appends rather than `"%" + to_string(id)`, which g++ 12 misreads as an overlapping copy.
std::string name(int id) { return std::string("%").append(std::to_string(id)); }

std::string numberText(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s;
}

std::string list(const std::vector<int>& ids, size_t from) {
  std::string s;
  for (size_t i = from; i < ids.size(); ++i) s += (i > from ? ", " : "") + name(ids[i]);
  return s;
}

struct Line {
  int depth;
  std::string text, type, layout;
};

}  // namespace

std::string ir(const Grid& grid, const Body& body, int arch) {
  const tir::Kernel k = trace(grid, body);
  // The layouts and shared memory are the CUDA generator's own for that GPU.
  const CudaPlan plan = planCuda(k, arch);
  const int threads = plan.kernel.threads;

  std::string out = "tile program: grid " + shapeText(k.grid) + ", " + std::to_string(threads / 32) +
                    (threads == 32 ? " warp" : " warps") + " (" + std::to_string(threads) +
                    " threads), " + std::to_string(k.stages) + (k.stages == 1 ? " stage" : " stages") +
                    ", shared memory " + std::to_string(plan.kernel.sharedBytes) + " bytes\n";
  for (size_t i = 0; i < k.operands.size(); ++i) {
    const tir::Operand& o = k.operands[i];
    out += std::string("  t").append(std::to_string(i)) + " = " + (o.write ? "write " : "read ") +
           dtypeName(o.tensor.dtype()) + shapeText(o.tensor.shape()) + " strides " +
           shapeText(o.tensor.strides()) + " in blocks " + shapeText(o.block) +
           (o.write ? "" : ", fill " + numberText(o.fill)) + "\n";
  }

  std::vector<Line> lines;
  int depth = 1;
  for (size_t at = 0; at < k.ops.size(); ++at) {
    const tir::Op& op = k.ops[at];
    const auto operand = std::string("t").append(std::to_string(op.operand));
    std::string text;
    switch (op.kind) {
      case tir::Kind::ProgramId: text = "id " + std::to_string(op.axis); break;
      case tir::Kind::IndexConst: text = "index " + std::to_string(k.values[static_cast<size_t>(op.result)].lo); break;
      case tir::Kind::IndexAdd: case tir::Kind::IndexSub: case tir::Kind::IndexMul:
        text = std::string(tir::kindName(op.kind)) + " " + list(op.args, 0);
        break;
      case tir::Kind::Full: text = "full " + numberText(op.value); break;
      case tir::Kind::Load: text = "load " + operand + "[" + list(op.args, 0) + "]"; break;
      case tir::Kind::Store: text = "store " + operand + "[" + list(op.args, 1) + "], " + name(op.args[0]); break;
      case tir::Kind::Unary: text = std::string(tensor::opName(op.unary)) + " " + list(op.args, 0); break;
      case tir::Kind::Binary: text = std::string(tensor::opName(op.binary)) + " " + list(op.args, 0); break;
      case tir::Kind::Where: text = "where " + list(op.args, 0); break;
      case tir::Kind::Cast: text = "cast " + list(op.args, 0); break;
      case tir::Kind::Reduce:
        text = std::string(tir::reductionName(op.reduction)) + " " + name(op.args[0]) + ", axis " + std::to_string(op.axis);
        break;
      case tir::Kind::Dot:
        text = "dot " + name(op.args[0]) + ", " + name(op.args[1]) +
               (op.args.size() == 3 ? ", acc " + name(op.args[2]) : "");
        break;
      case tir::Kind::FoldBegin:
        text = "fold " + name(op.result) + " from " + name(op.args[0]) + " count " + name(op.args[1]) +
               ", acc " + name(op.result2) + " = " + name(op.args[2]) + " {";
        break;
      case tir::Kind::FoldEnd: text = "} " + name(op.result) + " = yield " + name(op.args[0]); break;
    }
    if (op.kind == tir::Kind::FoldEnd) --depth;
    if (op.result >= 0 && op.kind != tir::Kind::FoldBegin && op.kind != tir::Kind::FoldEnd) text = name(op.result) + " = " + text;
    Line line{depth, text, "", ""};
    const int typed = op.kind == tir::Kind::FoldBegin ? op.result2 : op.result;
    if (typed >= 0) {
      const tir::Value& v = k.values[static_cast<size_t>(typed)];
      line.type = tir::typeText(v);
      line.layout = v.index ? "uniform, " + std::to_string(v.lo) + ".." + std::to_string(v.hi)
                            : plan.valueLayouts[static_cast<size_t>(typed)];
      if (!plan.opNotes[at].empty()) line.layout += "; " + plan.opNotes[at];
    }
    lines.push_back(line);
    if (op.kind == tir::Kind::FoldBegin) ++depth;
  }

  size_t textWidth = 0, typeWidth = 0;
  for (const Line& l : lines) {
    textWidth = std::max(textWidth, 2 * static_cast<size_t>(l.depth) + l.text.size());
    typeWidth = std::max(typeWidth, l.type.size());
  }
  for (const Line& l : lines) {
    std::string s = std::string(2 * static_cast<size_t>(l.depth), ' ') + l.text;
    if (!l.type.empty()) {
      s.resize(textWidth + 2, ' ');
      s += ": " + l.type;
      s.resize(textWidth + 4 + typeWidth + 2, ' ');
      s += l.layout;
    }
    out += s + "\n";
  }
  return out;
}

}  // namespace gizml::tile
