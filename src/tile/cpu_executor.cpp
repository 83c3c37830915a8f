// The CPU executor: the grid's points in parallel on the thread pool, each running the IR as a
// list of whole-tile operations on f32 buffers (the Highway kernels of the tensor layer for
// elementwise work, the tensor reductions' order for sums, sgemm for dot).
//
// What keeps a product near sgemm's speed (docs/tile.md, "The CPU executor's speed"): each
// thread keeps its buffers from run to run and takes grid points from a shared counter; a dot
// whose accumulator dies there accumulates in the accumulator's own buffer (no copy in, no copy
// back at the fold's end); a load used only as a dot operand reads the tensor in place when the
// block lies inside it (sgemm packs from any strides); and on a worker a dot packs its operands
// itself, keeping packed tensor blocks that later points read again.
#include <gizml/tile.h>
#include <hwy/aligned_allocator.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/thread_pool.h"
#include "cpu/convert.h"
#include "cpu/elementwise.h"
#include "cpu/gemm.h"
#include "cpu/gemm_kernel.h"
#include "cpu/reduce.h"
#include "tile/ir.h"
#include "tile/run.h"

namespace gizml::tile {
namespace {

using tir::Kind;

// A dot operand: its first element and strides (a tile in the arena, or a block of a tensor).
struct Matrix {
  const float* data = nullptr;
  int64_t rowStride = 0, colStride = 1;
  bool inTensor = false;  // a block of a tensor (the same address holds the same values all run)
};

// A dot operand packed into sgemm's panels (cpu/gemm_kernel.h), and where it came from.
struct PackedBlock {
  Matrix from;
  int64_t rows = 0, cols = 0, floats = 0, capacity = 0;
  hwy::AlignedFreeUniquePtr<float[]> data;

  float* reserve(int64_t n) {
    if (n > capacity) {
      data = hwy::AllocateAligned<float>(static_cast<size_t>(n));
      capacity = n;
    }
    floats = n;
    return data.get();
  }
};

// The packed blocks of tensors that one operand of one dot read on this worker, kept while they
// are read again: consecutive grid points often read the same block (a product's points along a
// row of the grid share their rows of A), and packing them again would cost as much as an eighth
// of the product. An operand whose blocks are seldom read twice stops keeping them.
struct PackCache {
  static constexpr int64_t kBudget = int64_t{1} << 20;  // floats kept (4 MB)
  static constexpr size_t kMaxBlocks = 256;
  std::vector<PackedBlock> blocks;  // [0, used) hold blocks, the rest are spare buffers
  size_t used = 0;
  int64_t floats = 0, lookups = 0, hits = 0;
  bool off = false;
  PackedBlock scratch;  // blocks not kept
};

// One worker's registers: tile values in an arena, indices, fold bounds, dot operands read in
// place, scratch for broadcast operands, and the grid point's coordinates and a block index.
struct Frame {
  std::vector<float> arena;
  std::vector<int64_t> index;
  std::vector<int64_t> stop;
  std::vector<Matrix> matrix;
  std::vector<PackCache> packs;  // two per op: a dot's operands a and b
  bool ownThread = false;        // the sgemm of a dot runs on this thread alone
  std::vector<float> scratch[3];
  std::vector<int64_t> coord, block, pos;
  bool busy = false;  // a run is using it
};

// Each thread's frame, kept from run to run so that its buffers are allocated and paged in once.
// A run forgets the packed blocks of the one before (their buffers stay, within kKeptFloats).
Frame& threadFrame() {
  thread_local Frame frame;
  return frame;
}
constexpr int64_t kKeptFloats = int64_t{16} << 20;  // 64 MB a thread, beyond which a run frees

// Frees what a frame holds beyond kKeptFloats (packed blocks first, then the arena).
void trim(Frame& f) {
  int64_t packed = 0;
  for (const PackCache& c : f.packs) {
    packed += c.scratch.capacity;
    for (const PackedBlock& b : c.blocks) packed += b.capacity;
  }
  if (packed > kKeptFloats / 2) f.packs.clear();
  if (static_cast<int64_t>(f.arena.capacity()) > kKeptFloats / 2) f.arena = {};
}

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
void forBlockRows(const tir::Operand& o, const std::vector<int64_t>& blockIndex, std::vector<int64_t>& pos,
                  F&& row) {
  const Shape& shape = o.tensor.shape();
  const Shape& strides = o.tensor.strides();
  const size_t rank = shape.size();
  if (rank == 0) return row(0, 0, 1);
  const int64_t cols = o.block.back();
  const int64_t lastStart = blockIndex.back() * cols;
  const int64_t valid = std::clamp<int64_t>(shape.back() - lastStart, 0, cols);
  const int64_t rows = tir::elementCount(o.block) / cols;
  pos.assign(rank - 1, 0);
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
  explicit Executor(const tir::Kernel& k)
      : k_(k), offset_(k.values.size(), -1), inPlace_(k.values.size(), false) {
    // Each op's last reader, and whether a load's only readers are dots (as operand a or b).
    std::vector<int64_t> lastUse(k.values.size(), -1);
    std::vector<bool> dotOnly(k.values.size(), true);
    for (size_t pc = 0; pc < k.ops.size(); ++pc) {
      const tir::Op& op = k.ops[pc];
      for (size_t i = 0; i < op.args.size(); ++i) {
        const auto a = static_cast<size_t>(op.args[i]);
        lastUse[a] = static_cast<int64_t>(pc);
        if (op.kind != Kind::Dot || i > 1) dotOnly[a] = false;
      }
    }
    for (size_t pc = 0; pc < k.ops.size(); ++pc) {
      const tir::Op& op = k.ops[pc];
      if (op.kind == Kind::Load && op.result >= 0 && dotOnly[static_cast<size_t>(op.result)] &&
          k.operands[static_cast<size_t>(op.operand)].block.size() == 2)
        inPlace_[static_cast<size_t>(op.result)] = true;
      for (int id : {op.result, op.result2}) {
        if (id < 0 || k.values[static_cast<size_t>(id)].index) continue;
        if (id == op.result && accumulatesInPlace(op, pc, lastUse)) {
          offset_[static_cast<size_t>(id)] = offset_[static_cast<size_t>(op.args[2])];
          continue;
        }
        const int64_t n = tir::elementCount(k.values[static_cast<size_t>(id)].shape);
        offset_[static_cast<size_t>(id)] = arena_;
        arena_ += n;
        largest_ = std::max(largest_, n);
      }
    }
    for (const tir::Operand& o : k.operands) largest_ = std::max(largest_, tir::elementCount(o.block));
    for (const tir::Operand& w : k.operands)
      for (const tir::Operand& r : k.operands)
        if (w.write && !r.write && w.tensor.storage() == r.tensor.storage()) keepPacked_ = false;
  }

  void run() const {
    // One task per worker, each with its own frame, taking points from a shared counter (a
    // worker slowed by the rest of the machine takes fewer). A single task runs on the calling
    // thread outside the pool, so a one-point grid's sgemm still uses every thread.
    const int64_t points = tir::gridPoints(k_.grid);
    const int64_t workers = std::min<int64_t>(points, core::threadCount());
    std::atomic<int64_t> next{0};
    core::parallelTasks(workers, [&](int64_t) {
      Frame& kept = threadFrame();
      Frame fresh;  // should a run ever start inside another on this thread
      Frame& f = kept.busy ? fresh : kept;
      struct Release {
        Frame& f;
        ~Release() {
          f.busy = false;
          trim(f);
        }
      } release{f};
      f.busy = true;
      f.arena.resize(static_cast<size_t>(arena_));
      f.index.resize(k_.values.size());
      f.stop.resize(k_.ops.size());
      f.matrix.assign(k_.values.size(), Matrix{});
      for (auto& s : f.scratch) s.resize(static_cast<size_t>(largest_));
      f.coord.resize(k_.grid.size());
      f.packs.resize(2 * k_.ops.size());
      for (PackCache& c : f.packs) {  // the blocks of the run before are other tensors' (or freed)
        c.used = 0;
        c.floats = c.lookups = c.hits = 0;
        c.off = false;
      }
      f.ownThread = workers > 1 || core::threadCount() == 1;
      for (int64_t point; (point = next.fetch_add(1)) < points;) runPoint(f, point);
    });
  }

 private:
  float* tile(Frame& f, int id) const { return f.arena.data() + offset_[static_cast<size_t>(id)]; }
  const tir::Value& value(int id) const { return k_.values[static_cast<size_t>(id)]; }

  // Whether op is a dot that may accumulate in its accumulator's buffer: the accumulator is read
  // by nothing after it (in the same loop body: a value from outside the body is read again by
  // the next pass) and is neither of its operands.
  bool accumulatesInPlace(const tir::Op& op, size_t pc, const std::vector<int64_t>& lastUse) const {
    if (op.kind != Kind::Dot || op.args.size() != 3) return false;
    const int c = op.args[2];
    const auto at = [&](int id) { return offset_[static_cast<size_t>(id)]; };
    return lastUse[static_cast<size_t>(c)] == static_cast<int64_t>(pc) &&
           value(c).region == value(op.result).region && at(c) != at(op.args[0]) && at(c) != at(op.args[1]);
  }

  // The operand `id` in shape `shape`: itself when the shapes agree, else broadcast into scratch.
  const float* operand(Frame& f, int id, const Shape& shape, int slot) const {
    if (value(id).shape == shape) return tile(f, id);
    float* out = f.scratch[slot].data();
    expand(tile(f, id), value(id).shape, shape, out);
    return out;
  }

  void runPoint(Frame& f, int64_t point) const {
    for (size_t a = k_.grid.size(); a-- > 0;) {
      f.coord[a] = point % k_.grid[a];
      point /= k_.grid[a];
    }
    for (size_t pc = 0; pc < k_.ops.size();) pc = step(f, pc);
  }

  // Runs ops[pc]; returns the next pc.
  size_t step(Frame& f, size_t pc) const {
    const tir::Op& op = k_.ops[pc];
    auto idx = [&](size_t i) -> int64_t& { return f.index[static_cast<size_t>(op.args[i])]; };
    int64_t& out = f.index[static_cast<size_t>(std::max(op.result, 0))];
    switch (op.kind) {
      case Kind::ProgramId: out = f.coord[static_cast<size_t>(op.axis)]; break;
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
        // A body that accumulated in place already left its value in acc.
        const float* next = tile(f, op.args[0]);
        if (next != acc) std::memcpy(acc, next, n * sizeof(float));
        if (++f.index[static_cast<size_t>(begin.result)] < f.stop[static_cast<size_t>(op.match)])
          return static_cast<size_t>(op.match) + 1;
        std::memcpy(tile(f, op.result), acc, n * sizeof(float));
        break;
      }
    }
    return pc + 1;
  }

  // The block index of a load (args from `first` on) into f.block.
  const std::vector<int64_t>& blockIndex(Frame& f, const tir::Op& op, size_t first) const {
    f.block.clear();
    for (size_t i = first; i < op.args.size(); ++i) f.block.push_back(f.index[static_cast<size_t>(op.args[i])]);
    return f.block;
  }

  void load(Frame& f, const tir::Op& op) const {
    const tir::Operand& o = k_.operands[static_cast<size_t>(op.operand)];
    float* out = tile(f, op.result);
    const auto* base = static_cast<const char*>(o.tensor.rawData());
    const auto size = static_cast<int64_t>(dtypeSize(o.tensor.dtype()));
    const int64_t cols = o.block.empty() ? 1 : o.block.back();
    const Shape& strides = o.tensor.strides();
    const int64_t stride = strides.empty() ? 1 : strides.back();
    const auto fill = static_cast<float>(o.fill);
    const std::vector<int64_t>& block = blockIndex(f, op, 0);
    if (inPlace_[static_cast<size_t>(op.result)]) {
      // A dot operand: a block of an f32 tensor that lies inside it is read where it is.
      Matrix& m = f.matrix[static_cast<size_t>(op.result)];
      const Shape& shape = o.tensor.shape();
      bool inside = o.tensor.dtype() == DType::F32;
      int64_t at = 0;
      for (size_t d = 0; d < 2 && inside; ++d) {
        const int64_t first = block[d] * o.block[d];
        inside = first >= 0 && first + o.block[d] <= shape[d];
        at += first * strides[d];
      }
      if (inside) {
        m = {reinterpret_cast<const float*>(base) + at, strides[0], strides[1], keepPacked_};
        return;
      }
      m = {out, cols, 1, false};
    }
    forBlockRows(o, block, f.pos, [&](int64_t to, int64_t from, int64_t valid) {
      if (valid > 0) cpu::loadF32(o.tensor.dtype(), base + from * size, stride, valid, out + to);
      std::fill(out + to + valid, out + to + cols, fill);
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
    forBlockRows(o, blockIndex(f, op, 1), f.pos, [&](int64_t at, int64_t to, int64_t valid) {
      if (valid == 0) return;
      const float* values = in + at;
      if (dtype != DType::F32) {
        std::copy(in + at, in + at + valid, row);
        cpu::roundF32To(dtype, row, valid);
        values = row;
      }
      if (stride == 1) {
        cpu::storeF32(dtype, values, valid, base + to * size);
        return;
      }
      for (int64_t j = 0; j < valid; ++j) cpu::storeF32(dtype, values + j, 1, base + (to + j * stride) * size);
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

  // An operand of a dot: where its load left it, or its tile.
  Matrix matrix(Frame& f, int id) const {
    if (inPlace_[static_cast<size_t>(id)]) return f.matrix[static_cast<size_t>(id)];
    return {tile(f, id), value(id).shape[1], 1, false};
  }

  // Operand `slot` (0: a, rows x cols = m x k; 1: b, k x n) of the dot at pc, packed: a block
  // kept from an earlier point when the same tensor block was packed there.
  const float* pack(Frame& f, size_t pc, int slot, const Matrix& x, int64_t rows, int64_t cols,
                    const cpu::gemm::Tile& t) const {
    PackCache& c = f.packs[2 * pc + static_cast<size_t>(slot)];
    const auto fill = [&](PackedBlock& b) {
      if (slot == 0) {
        cpu::gemm::packA(x.data, x.rowStride, x.colStride, rows, cols,
                         b.reserve((rows + t.mr - 1) / t.mr * t.mr * cols));
      } else {
        cpu::gemm::packB(x.data, x.rowStride, x.colStride, rows, cols,
                         b.reserve((cols + t.nr - 1) / t.nr * t.nr * rows));
      }
      b.from = x;
      b.rows = rows;
      b.cols = cols;
      return b.data.get();
    };
    if (!x.inTensor || c.off) return fill(c.scratch);
    ++c.lookups;
    for (size_t i = 0; i < c.used; ++i) {
      const PackedBlock& b = c.blocks[i];
      if (b.from.data == x.data && b.from.rowStride == x.rowStride && b.from.colStride == x.colStride &&
          b.rows == rows && b.cols == cols) {
        ++c.hits;
        return b.data.get();
      }
    }
    if (c.lookups >= 256 && c.hits * 8 < c.lookups) {  // seldom read twice: stop keeping
      c.off = true;
      c.blocks.clear();
      c.used = 0;
      return fill(c.scratch);
    }
    if (c.used == PackCache::kMaxBlocks || c.floats + rows * cols > PackCache::kBudget) {
      c.used = 0;  // full: start again (the buffers stay for reuse)
      c.floats = 0;
    }
    if (c.used == c.blocks.size()) c.blocks.emplace_back();
    PackedBlock& b = c.blocks[c.used++];
    const float* packed = fill(b);
    c.floats += b.floats;
    return packed;
  }

  void dot(Frame& f, const tir::Op& op) const {
    const Shape &as = value(op.args[0]).shape, &bs = value(op.args[1]).shape;
    const int64_t m = as[0], k = as[1], n = bs[1];
    float* out = tile(f, op.result);
    const bool accumulate = op.args.size() == 3;
    if (accumulate && out != tile(f, op.args[2])) std::copy_n(tile(f, op.args[2]), m * n, out);
    const Matrix a = matrix(f, op.args[0]), b = matrix(f, op.args[1]);
    // On a worker of the grid, a product of one k block (sgemm's order of additions: one fma
    // chain over k, then added to out) runs here on packed operands, kept for later points.
    // Anything else, or a grid too small to fill the threads, goes to sgemm itself.
    if (!f.ownThread || k > cpu::kGemmKc || m <= cpu::gemm::kStreamRows || m > 512 || n > 2048) {
      cpu::sgemm(m, n, k, a.data, a.rowStride, a.colStride, b.data, b.rowStride, b.colStride, out, n, accumulate);
      return;
    }
    const cpu::gemm::Tile t = cpu::gemm::tile();
    const auto pc = static_cast<size_t>(&op - k_.ops.data());
    const float* packedA = pack(f, pc, 0, a, m, k, t);
    const float* packedB = pack(f, pc, 1, b, k, n, t);
    cpu::gemm::macroKernel(m, n, k, packedA, packedB, out, n, accumulate);
  }

  const tir::Kernel& k_;
  std::vector<int64_t> offset_;
  std::vector<bool> inPlace_;  // loads whose dots may read the tensor where it is
  bool keepPacked_ = true;     // no tensor is both read and written: packed blocks stay valid
  int64_t arena_ = 0;
  int64_t largest_ = 1;
};

}  // namespace

void runOnCpu(const tir::Kernel& k) { Executor(k).run(); }

}  // namespace gizml::tile
