// The layout assignment: one blocked layout per tile shape, shared memory where values cross
// threads.
#include "tile/layout.h"

#include <algorithm>

namespace gizml::tile {

std::string Layout::text() const {
  return "threads " + std::to_string(threadRows) + "x" + std::to_string(threadCols) + " of " +
         std::to_string(threads) + ", each " + std::to_string(rowRepeats) + "x" +
         std::to_string(colRepeats * vec);
}

Layout blockedLayout(const Shape& shape, int threads) {
  Layout l;
  l.threads = threads;
  l.cols = shape.empty() ? 1 : shape.back();
  l.rows = tir::elementCount(shape) / l.cols;
  l.vec = l.cols % 4 == 0 ? 4 : l.cols % 2 == 0 ? 2 : 1;
  l.threadCols = static_cast<int>(std::min<int64_t>(threads, l.cols / l.vec));
  l.threadRows = static_cast<int>(std::min<int64_t>(threads / l.threadCols, l.rows));
  l.colRepeats = (l.cols / l.vec + l.threadCols - 1) / l.threadCols;
  l.rowRepeats = (l.rows + l.threadRows - 1) / l.threadRows;
  return l;
}

int warpsFor(const tir::Kernel& k) {
  int64_t largest = 1;
  for (const tir::Value& v : k.values)
    if (!v.index) largest = std::max(largest, tir::elementCount(v.shape));
  return static_cast<int>(std::clamp<int64_t>(largest / 1024, 1, 8));
}

std::string stagingNote(const tir::Kernel& k, const tir::Op& op) {
  const auto& shapeOf = [&](int id) -> const Shape& { return k.values[static_cast<size_t>(id)].shape; };
  std::string note;
  switch (op.kind) {
    case tir::Kind::Binary: case tir::Kind::Where:
      for (int a : op.args)
        if (shapeOf(a) != shapeOf(op.result))
          note += (note.empty() ? "" : ", ") + std::string("%").append(std::to_string(a));
      if (!note.empty()) note += " broadcast through shared memory";
      break;
    case tir::Kind::Reduce: note = std::string("%").append(std::to_string(op.args[0])) + " through shared memory"; break;
    case tir::Kind::Dot:
      note = "operands in shared memory " + tensor::shapeText(shapeOf(op.args[0])) + " + " +
             tensor::shapeText(shapeOf(op.args[1]));
      break;
    default: break;
  }
  return note;
}

}  // namespace gizml::tile
