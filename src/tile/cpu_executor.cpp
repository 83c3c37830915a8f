// The CPU executor: the grid's points in parallel on the thread pool, each running the IR as a
// list of whole-tile operations on f32 buffers (the Highway kernels of the tensor layer for
// elementwise work, the tensor reductions' order for sums, sgemm for dot).
#include <gizml/tile.h>

#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"
#include "cpu/convert.h"
#include "cpu/elementwise.h"
#include "cpu/gemm.h"
#include "cpu/reduce.h"
#include "tile/ir.h"
#include "tile/run.h"

namespace gizml::tile {
namespace {

using tir::Kind;

// One worker's registers: tile values in an arena, indices, fold bounds, and scratch for
// broadcast operands.
struct Frame {
  std::vector<float> arena;
  std::vector<int64_t> index;
  std::vector<int64_t> stop;
  std::vector<float> scratch[3];
};

// Copies `in` (shape `from`) broadcast to shape `to` into out, a row of the last axis at a time.
void expand(const float* in, const Shape& from, const Shape& to, float* out) {
  const size_t rank = to.size();
  if (rank == 0) {
    out[0] = in[0];
    return;
  }
  Shape strides(rank, 0);
  int64_t stride = 1;
  for (size_t i = rank; i-- > 0;) {
    const size_t lead = rank - from.size();
    const int64_t n = i < lead ? 1 : from[i - lead];
    strides[i] = n == 1 ? 0 : stride;
    stride *= n;
  }
  const int64_t cols = to.back(), rows = tir::elementCount(to) / cols;
  std::vector<int64_t> pos(rank, 0);
  int64_t at = 0;
  for (int64_t r = 0; r < rows; ++r, out += cols) {
    if (strides.back() == 0) std::fill_n(out, cols, in[at]);
    else std::memcpy(out, in + at, static_cast<size_t>(cols) * sizeof(float));
    for (size_t d = rank - 1; d-- > 0;) {
      at += strides[d];
      if (++pos[d] < to[d]) break;
      at -= strides[d] * to[d];
      pos[d] = 0;
    }
  }
}

// Calls row(tileOffset, tensorOffset, valid) for each run of the block along its last axis:
// valid is how many of its elements lie inside the tensor (0 when the row is outside).
template <class F>
void forBlockRows(const tir::Operand& o, const std::vector<int64_t>& blockIndex, F&& row) {
  const Shape& shape = o.tensor.shape();
  const Shape& strides = o.tensor.strides();
  const size_t rank = shape.size();
  if (rank == 0) return row(0, 0, 1);
  const int64_t cols = o.block.back();
  const int64_t lastStart = blockIndex.back() * cols;
  const int64_t valid = std::clamp<int64_t>(shape.back() - lastStart, 0, cols);
  const int64_t rows = tir::elementCount(o.block) / cols;
  std::vector<int64_t> pos(rank - 1, 0);
  for (int64_t r = 0; r < rows; ++r) {
    bool inside = valid > 0;
    int64_t at = lastStart * strides.back();
    for (size_t d = 0; d + 1 < rank; ++d) {
      const int64_t g = blockIndex[d] * o.block[d] + pos[d];
      inside = inside && g >= 0 && g < shape[d];
      at += g * strides[d];
    }
    row(r * cols, at, inside ? valid : 0);
    for (size_t d = rank - 1; d-- > 0;) {
      if (++pos[d] < o.block[d]) break;
      pos[d] = 0;
    }
  }
}

class Executor {
 public:
  explicit Executor(const tir::Kernel& k) : k_(k), offset_(k.values.size(), -1) {
    for (const tir::Op& op : k.ops)
      for (int id : {op.result, op.result2}) {
        if (id < 0 || k.values[static_cast<size_t>(id)].index) continue;
        const int64_t n = tir::elementCount(k.values[static_cast<size_t>(id)].shape);
        offset_[static_cast<size_t>(id)] = arena_;
        arena_ += n;
        largest_ = std::max(largest_, n);
      }
    for (const tir::Operand& o : k.operands) largest_ = std::max(largest_, tir::elementCount(o.block));
  }

  void run() const {
    core::parallelFor(tir::gridPoints(k_.grid), 1, [&](int64_t begin, int64_t end) {
      Frame f;
      f.arena.resize(static_cast<size_t>(arena_));
      f.index.resize(k_.values.size());
      f.stop.resize(k_.ops.size());
      for (auto& s : f.scratch) s.resize(static_cast<size_t>(largest_));
      for (int64_t point = begin; point < end; ++point) runPoint(f, point);
    });
  }

 private:
  float* tile(Frame& f, int id) const { return f.arena.data() + offset_[static_cast<size_t>(id)]; }
  const tir::Value& value(int id) const { return k_.values[static_cast<size_t>(id)]; }

  // The operand `id` in shape `shape`: itself when the shapes agree, else broadcast into scratch.
  const float* operand(Frame& f, int id, const Shape& shape, int slot) const {
    if (value(id).shape == shape) return tile(f, id);
    float* out = f.scratch[slot].data();
    expand(tile(f, id), value(id).shape, shape, out);
    return out;
  }

  void runPoint(Frame& f, int64_t point) const {
    std::vector<int64_t> coord(k_.grid.size());
    for (size_t a = k_.grid.size(); a-- > 0;) {
      coord[a] = point % k_.grid[a];
      point /= k_.grid[a];
    }
    for (size_t pc = 0; pc < k_.ops.size();) pc = step(f, coord, pc);
  }

  // Runs ops[pc]; returns the next pc.
  size_t step(Frame& f, const std::vector<int64_t>& coord, size_t pc) const {
    const tir::Op& op = k_.ops[pc];
    auto idx = [&](size_t i) -> int64_t& { return f.index[static_cast<size_t>(op.args[i])]; };
    int64_t& out = f.index[static_cast<size_t>(std::max(op.result, 0))];
    switch (op.kind) {
      case Kind::ProgramId: out = coord[static_cast<size_t>(op.axis)]; break;
      case Kind::IndexConst: out = value(op.result).lo; break;
      case Kind::IndexAdd: out = idx(0) + idx(1); break;
      case Kind::IndexSub: out = idx(0) - idx(1); break;
      case Kind::IndexMul: out = idx(0) * idx(1); break;
      case Kind::Full:
        std::fill_n(tile(f, op.result), tir::elementCount(value(op.result).shape), static_cast<float>(op.value));
        break;
      case Kind::Load: load(f, op); break;
      case Kind::Store: store(f, op); break;
      case Kind::Unary: case Kind::Binary: case Kind::Where: case Kind::Cast:
        elementwise(f, op);
        break;
      case Kind::Reduce: reduce(f, op); break;
      case Kind::Dot: dot(f, op); break;
      case Kind::FoldBegin: {
        const int64_t start = idx(0), count = idx(1);
        const auto n = static_cast<size_t>(tir::elementCount(value(op.args[2]).shape));
        const tir::Op& end = k_.ops[static_cast<size_t>(op.match)];
        if (count <= 0) {
          std::memcpy(tile(f, end.result), tile(f, op.args[2]), n * sizeof(float));
          return static_cast<size_t>(op.match) + 1;
        }
        std::memcpy(tile(f, op.result2), tile(f, op.args[2]), n * sizeof(float));
        out = start;
        f.stop[pc] = start + count;
        break;
      }
      case Kind::FoldEnd: {
        const tir::Op& begin = k_.ops[static_cast<size_t>(op.match)];
        const auto n = static_cast<size_t>(tir::elementCount(value(op.result).shape));
        float* acc = tile(f, begin.result2);
        if (op.args[0] != begin.result2) std::memcpy(acc, tile(f, op.args[0]), n * sizeof(float));
        if (++f.index[static_cast<size_t>(begin.result)] < f.stop[static_cast<size_t>(op.match)])
          return static_cast<size_t>(op.match) + 1;
        std::memcpy(tile(f, op.result), acc, n * sizeof(float));
        break;
      }
    }
    return pc + 1;
  }

  std::vector<int64_t> blockIndex(const Frame& f, const tir::Op& op, size_t first) const {
    std::vector<int64_t> b;
    for (size_t i = first; i < op.args.size(); ++i) b.push_back(f.index[static_cast<size_t>(op.args[i])]);
    return b;
  }

  void load(Frame& f, const tir::Op& op) const {
    const tir::Operand& o = k_.operands[static_cast<size_t>(op.operand)];
    float* out = tile(f, op.result);
    const auto* base = static_cast<const char*>(o.tensor.rawData());
    const auto size = static_cast<int64_t>(dtypeSize(o.tensor.dtype()));
    const int64_t cols = o.block.empty() ? 1 : o.block.back();
    const int64_t stride = o.tensor.strides().empty() ? 1 : o.tensor.strides().back();
    const auto fill = static_cast<float>(o.fill);
    forBlockRows(o, blockIndex(f, op, 0), [&](int64_t at, int64_t from, int64_t valid) {
      if (valid > 0) cpu::loadF32(o.tensor.dtype(), base + from * size, stride, valid, out + at);
      std::fill(out + at + valid, out + at + cols, fill);
    });
  }

  void store(Frame& f, const tir::Op& op) const {
    const tir::Operand& o = k_.operands[static_cast<size_t>(op.operand)];
    const DType dtype = o.tensor.dtype();
    const float* in = tile(f, op.args[0]);
    float* row = f.scratch[0].data();
    auto* base = static_cast<char*>(o.tensor.rawData());
    const auto size = static_cast<int64_t>(dtypeSize(dtype));
    const int64_t stride = o.tensor.strides().empty() ? 1 : o.tensor.strides().back();
    forBlockRows(o, blockIndex(f, op, 1), [&](int64_t at, int64_t to, int64_t valid) {
      if (valid == 0) return;
      std::copy(in + at, in + at + valid, row);
      cpu::roundF32To(dtype, row, valid);
      if (stride == 1) {
        cpu::storeF32(dtype, row, valid, base + to * size);
        return;
      }
      for (int64_t j = 0; j < valid; ++j) cpu::storeF32(dtype, row + j, 1, base + (to + j * stride) * size);
    });
  }

  void elementwise(Frame& f, const tir::Op& op) const {
    const tir::Value& v = value(op.result);
    float* out = tile(f, op.result);
    const int64_t n = tir::elementCount(v.shape);
    switch (op.kind) {
      case Kind::Unary: cpu::unaryF32(op.unary, tile(f, op.args[0]), out, n); break;
      case Kind::Binary:
        cpu::binaryF32(op.binary, operand(f, op.args[0], v.shape, 0), operand(f, op.args[1], v.shape, 1), out, n);
        break;
      case Kind::Where:
        cpu::whereF32(operand(f, op.args[0], v.shape, 0), operand(f, op.args[1], v.shape, 1),
                      operand(f, op.args[2], v.shape, 2), out, n);
        break;
      default: std::copy_n(tile(f, op.args[0]), n, out); break;  // Cast: copy, then round
    }
    if (v.dtype != DType::F32) cpu::roundF32To(v.dtype, out, n);
  }

  void reduce(Frame& f, const tir::Op& op) const {
    const Shape& shape = value(op.args[0]).shape;
    const auto axis = static_cast<size_t>(op.axis);
    const int64_t len = shape[axis];
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < shape.size(); ++d) (d < axis ? outer : inner) *= d == axis ? 1 : shape[d];
    const cpu::ReduceOp r = op.reduction == tir::Reduction::Sum ? cpu::ReduceOp::Sum
                            : op.reduction == tir::Reduction::Max ? cpu::ReduceOp::Max
                                                                 : cpu::ReduceOp::Min;
    const float* in = tile(f, op.args[0]);
    float* out = tile(f, op.result);
    float* run = f.scratch[0].data();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const float* x = in + o * len * inner + i;
        if (inner != 1) {
          for (int64_t j = 0; j < len; ++j) run[j] = x[j * inner];
          x = run;
        }
        out[o * inner + i] = cpu::reduceF32(r, x, len);
      }
    const DType dtype = value(op.result).dtype;
    if (dtype != DType::F32) cpu::roundF32To(dtype, out, outer * inner);
  }

  void dot(Frame& f, const tir::Op& op) const {
    const Shape &a = value(op.args[0]).shape, &b = value(op.args[1]).shape;
    const int64_t m = a[0], k = a[1], n = b[1];
    float* out = tile(f, op.result);
    const bool accumulate = op.args.size() == 3;
    if (accumulate) std::copy_n(tile(f, op.args[2]), m * n, out);
    cpu::sgemm(m, n, k, tile(f, op.args[0]), k, 1, tile(f, op.args[1]), n, 1, out, n, accumulate);
  }

  const tir::Kernel& k_;
  std::vector<int64_t> offset_;
  int64_t arena_ = 0;
  int64_t largest_ = 1;
};

}  // namespace

void runOnCpu(const tir::Kernel& k) { Executor(k).run(); }

}  // namespace gizml::tile
