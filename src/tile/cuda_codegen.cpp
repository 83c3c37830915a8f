// Tile::cuda: CUDA C++ from the tile IR. One thread block per grid point; each tile value is a
// register array in its blocked layout (src/tile/layout.h), indices are uniform scalars, values
// cross threads through dynamic shared memory between barriers, and loads and stores are masked
// at the tensor's edges. A fold is a loop; barriers inside it are reached by every thread. A
// product of F16/BF16 tiles runs on the tensor cores (cuda_codegen_mma.cpp): its result stays in
// the mma fragments' layout, and with p.stages(n) its operands come through an n-stage cp.async
// pipeline. Sums and F32 products follow the CPU's order of additions.
#include <gizml/tile.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "tensor/gpu/codegen.h"
#include "tensor/gpu/cuda_expr.h"
#include "tile/cuda_codegen.h"
#include "tile/layout.h"
#include "tile/run.h"

namespace gizml::tile {
namespace {

namespace expr = gpuops;

// The layout helper of every generated kernel; the guard lets several kernels share one file.
constexpr const char* kHelpers = R"(#ifndef GIZML_TILE_HELPERS
#define GIZML_TILE_HELPERS
// The element of a [rows, cols] tile in register e of thread t (-1: none); src/tile/layout.h.
__device__ __forceinline__ int gz_lin(int t, int e, int rows, int cols, int vec, int tr, int tc, int cr) {
  if (t >= tr * tc) return -1;
  const int row = (e / (cr * vec)) * tr + t / tc;
  const int col = (((e / vec) % cr) * tc + t % tc) * vec + e % vec;
  return row < rows && col < cols ? row * cols + col : -1;
}
#endif
)";

std::string v(int id) { return std::string("v").append(std::to_string(id)); }

std::string floatText(double x) {
  const auto f = static_cast<float>(x);
  if (!std::isfinite(f)) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "__int_as_float(0x%08x)", std::bit_cast<uint32_t>(f));
    return buf;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9gf", static_cast<double>(f));
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s.insert(s.size() - 1, ".0");
  return s;
}

const char* elementType(DType d) {
  switch (d) {
    case DType::F16: case DType::BF16: return "u16";  // bits, converted as the CPU does
    case DType::Bool: return "unsigned char";
    default: return "float";
  }
}

// Where a value's registers live: the blocked layout of its shape, or an mma result layout.
struct ValueLayout {
  bool mma = false;
  Layout blocked;
  cudagen::MmaLayout tc;
  int64_t regs() const { return mma ? tc.regs() : blocked.regs(); }
  bool operator==(const ValueLayout& o) const {
    return mma == o.mma && (mma ? tc == o.tc
                                : blocked.rows == o.blocked.rows && blocked.cols == o.blocked.cols &&
                                      blocked.vec == o.blocked.vec && blocked.threadRows == o.blocked.threadRows &&
                                      blocked.threadCols == o.blocked.threadCols &&
                                      blocked.colRepeats == o.blocked.colRepeats && blocked.rowRepeats == o.blocked.rowRepeats);
  }
};

bool isHalf(DType d) { return d == DType::F16 || d == DType::BF16; }

class Codegen {
 public:
  Codegen(const tir::Kernel& k, int arch, bool tma) : k_(k), arch_(arch), tma_(tma), warps_(warpsFor(k)), threads_(32 * warps_) {
    defOp_.assign(k.values.size(), -1);
    uses_.assign(k.values.size(), 0);
    for (size_t i = 0; i < k.ops.size(); ++i) {
      const tir::Op& op = k.ops[i];
      if (op.result >= 0) defOp_[static_cast<size_t>(op.result)] = static_cast<int>(i);
      if (op.result2 >= 0) defOp_[static_cast<size_t>(op.result2)] = static_cast<int>(i);
      for (int a : op.args) ++uses_[static_cast<size_t>(a)];
    }
    assignLayouts();
    planPipelines();
  }

  CudaKernel generate() {
    for (size_t i = 0; i < k_.ops.size(); ++i) emit(static_cast<int>(i));
    std::string params;
    for (size_t i = 0; i < k_.operands.size(); ++i) {
      const tir::Operand& o = k_.operands[i];
      params += std::string(i ? ", " : "") + (o.write ? "" : "const ") + elementType(o.tensor.dtype()) +
                "* __restrict__ t" + std::to_string(i);
    }
    for (size_t j = 0; j < tensorMaps_.size(); ++j) params += ", const void* __restrict__ gz_map" + std::to_string(j);

    std::string head = "  const int t = threadIdx.x;\n";
    const int64_t bytes = pipelineBytes_ + generalWords_ * 4;
    if (bytes) {
      // Aligned for the swizzle atoms of tensor-core operands (cudagen::SharedBlock).
      head += "  extern __shared__ __align__(1024) float gz_smem[];\n";
      if (generalWords_) head += "  float* const gz_s = gz_smem + " + std::to_string(pipelineBytes_ / 4) + ";\n";
      if (usesHalves_) head += "  unsigned short* const gz_h = (unsigned short*)gz_s;\n";
      if (pipelineBytes_) head += "  unsigned char* const gz_pipe = (unsigned char*)gz_smem;\n";
    }
    for (const auto& [fold, p] : pipelines_) {
      if (!p.tma) continue;
      // The stages' mbarriers, one arrival each (thread 0's), visible before any copy uses them;
      // the tensor maps (copied into global memory by the host) fenced before the TMA reads them.
      head += "  if (t == 0) {\n    gz_fence_tensormap_acquire(gz_map" + std::to_string(p.mapA) +
              ");\n    gz_fence_tensormap_acquire(gz_map" + std::to_string(p.mapB) + ");\n    for (int s = 0; s < " + std::to_string(k_.stages) + "; ++s) gz_mbar_init(gz_saddr(gz_pipe) + " +
              std::to_string(p.barOffset) + "u + 8u * s, 1u);\n    gz_fence_mbar_init();\n  }\n  __syncthreads();\n";
      head += "  unsigned gz_ph" + std::to_string(fold) + " = 0u;\n";
    }

    CudaKernel out;
    out.threads = threads_;
    out.blocks = tir::gridPoints(k_.grid);
    out.sharedBytes = bytes;
    out.tensorMaps = tensorMaps_;
    const std::string signature = "(" + params + ") {\n" + head + body_ + "}\n";
    out.name = "gizml_tile_" + hashText(signature);
    std::string wgmma;
    for (const auto& [n, f16] : wgmmaShapes_) wgmma += expr::wgmmaSource(n, f16);
    out.source = "// Generated by gizml::tile (src/tile/cuda_codegen.cpp): grid " + tensor::shapeText(k_.grid) + ", " +
                 std::to_string(threads_) + " threads, " + std::to_string(out.sharedBytes) +
                 " bytes of dynamic shared memory" +
                 (!wgmma.empty() ? ", tensor cores (wgmma, sm_90a)" : usesMma_ ? ", tensor cores (sm_80+)" : "") +
                 (pipelineBytes_ ? ", a " + std::to_string(k_.stages) + (tensorMaps_.empty() ? "-stage cp.async pipeline" : "-stage TMA pipeline") : "") + ".\n" +
                 expr::elementwiseMathSource() +
                 kHelpers + (usesMma_ ? cudagen::mmaHelpers() : "") + wgmma + "extern \"C\" __global__ void __launch_bounds__(" +
                 std::to_string(threads_) + ") " + out.name + signature;
    return out;
  }

  // Where value id's registers are, for Tile::ir.
  std::string layoutText(int id) const {
    const tir::Value& val = value(id);
    if (val.index) return "";
    const tir::Op* d = definer(id);
    if (d && d->kind == tir::Kind::Load && pipelinedLoad(defOp_[static_cast<size_t>(id)]))
      return "no registers: the pipeline's cp.async copies into shared memory";
    const ValueLayout& l = layout(id);
    if (!l.mma) return l.blocked.text();
    const cudagen::MmaLayout& t = l.tc;
    if (t.wgmma)
      return "wgmma fragments: " + std::to_string(warps_ / 4) + (warps_ == 4 ? " warpgroup, " : " warpgroups, ") +
             "each " + std::to_string(t.fm) + " x m64n" + std::to_string(t.cols) + " (" + std::to_string(t.regs()) +
             " registers a thread)";
    return "mma.sync fragments: warps " + std::to_string(t.wr) + "x" + std::to_string(t.wc) + ", each " +
           std::to_string(t.fm) + "x" + std::to_string(t.fn) + " of m16n8 (" + std::to_string(t.regs()) +
           " registers a thread)";
  }

  // What op `at` puts in shared memory, for Tile::ir (empty: nothing).
  std::string sharedNote(int at) const {
    const tir::Op& op = k_.ops[static_cast<size_t>(at)];
    if (op.kind != tir::Kind::Dot || !layout(op.result).mma) return stagingNote(k_, op);
    const Shape &a = value(op.args[0]).shape, &b = value(op.args[1]).shape;
    const auto block = [](const Shape& s) {
      const cudagen::SharedBlock sb = cudagen::sharedBlock(s[0], s[1]);
      return tensor::shapeText(s) + (sb.chunks == 1 ? "" : " (" + std::to_string(sb.chunks * 16) + "-byte swizzle)");
    };
    const std::string operands = block(a) + " + " + block(b) + " 16-bit";
    const std::string unit = layout(op.result).tc.wgmma ? "; wgmma reads them through descriptors" : "; ldmatrix";
    if (pipelineOfDot(at))
      return "operands through " + std::to_string(k_.stages) + " stages of shared memory " + operands + unit;
    return "operands in shared memory " + operands + unit;
  }

 private:
  // A fold whose product reads its two operands straight from tensors, through n buffers of
  // shared memory filled ahead by cp.async (p.stages(n), n >= 2).
  struct Pipeline {
    int dot = -1;               // the Dot op
    int loadA = -1, loadB = -1; // the Load ops of its operands
    int64_t offset = 0;         // bytes into gz_smem
    int64_t aBytes = 0, stageBytes = 0;
    // Hopper's TMA instead of cp.async: one mbarrier a stage (8 bytes each from barOffset), the
    // tensor maps of A and B (indices into tensorMaps_), and the bytes a stage's boxes bring.
    bool tma = false;
    int64_t barOffset = 0, tmaBytes = 0;
    int mapA = -1, mapB = -1;
  };

  static std::string hashText(const std::string& s) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
  }

  const tir::Value& value(int id) const { return k_.values[static_cast<size_t>(id)]; }
  const ValueLayout& layout(int id) const { return layouts_[static_cast<size_t>(id)]; }
  ValueLayout blockedOf(const Shape& shape) const {
    ValueLayout l;
    l.blocked = blockedLayout(shape, threads_);
    return l;
  }
  const tir::Op* definer(int id) const {
    const int at = defOp_[static_cast<size_t>(id)];
    return at < 0 ? nullptr : &k_.ops[static_cast<size_t>(at)];
  }

  // Whether a Dot runs on the tensor cores: both operands F16 or both BF16 (tiles hold their
  // exact values in f32), k a multiple of 16, and an mma layout that tiles [m, n] over the warps.
  bool mmaDot(const tir::Op& op, cudagen::MmaLayout* l = nullptr) const {
    const tir::Value &a = value(op.args[0]), &b = value(op.args[1]);
    if (!isHalf(a.dtype) || a.dtype != b.dtype || a.shape[1] % 16 != 0) return false;
    cudagen::MmaLayout tmp;
    // Hopper's warpgroup instructions where the product's shape suits them, else mma.sync.
    if (arch_ >= 90 && cudagen::wgmmaLayout(a.shape[0], b.shape[1], warps_, l ? *l : tmp)) return true;
    return cudagen::mmaLayout(a.shape[0], b.shape[1], warps_, l ? *l : tmp);
  }

  // Layouts: blocked, except a tensor-core product's result, elementwise results of same-shaped
  // mma operands, and a fold's accumulator when its body yields an mma value (repeated until the
  // accumulators settle).
  void assignLayouts() {
    layouts_.assign(k_.values.size(), ValueLayout{});
    for (size_t id = 0; id < k_.values.size(); ++id)
      if (!k_.values[id].index) layouts_[id] = blockedOf(k_.values[id].shape);
    for (int round = 0; round < 4; ++round) {
      bool changed = false;
      const auto set = [&](int id, const ValueLayout& l) {
        if (!(layouts_[static_cast<size_t>(id)] == l)) {
          layouts_[static_cast<size_t>(id)] = l;
          changed = true;
        }
      };
      for (const tir::Op& op : k_.ops) {
        switch (op.kind) {
          case tir::Kind::Dot: {
            ValueLayout l;
            if (mmaDot(op, &l.tc)) {
              l.mma = true;
              set(op.result, l);
            }
            break;
          }
          case tir::Kind::Unary: case tir::Kind::Binary: case tir::Kind::Where: case tir::Kind::Cast: {
            ValueLayout l = blockedOf(value(op.result).shape);
            for (int a : op.args)
              if (value(a).shape == value(op.result).shape && layout(a).mma) {
                l = layout(a);
                break;
              }
            set(op.result, l);
            break;
          }
          case tir::Kind::FoldBegin: {
            const tir::Op& end = k_.ops[static_cast<size_t>(op.match)];
            set(op.result2, layout(end.args[0]));
            break;
          }
          case tir::Kind::FoldEnd: set(op.result, layout(k_.ops[static_cast<size_t>(op.match)].result2)); break;
          default: break;
        }
      }
      if (!changed) break;
    }
    for (const ValueLayout& l : layouts_) usesMma_ = usesMma_ || l.mma;
  }

  // p.stages(n) with n >= 2: each fold's first tensor-core product whose operands are loads in
  // the same body, of 2-byte tensors with fill 0, used only by the product, and blocks whose
  // columns are a multiple of 8, gets a pipeline.
  void planPipelines() {
    if (k_.stages < 2) return;
    for (size_t i = 0; i < k_.ops.size(); ++i) {
      const tir::Op& begin = k_.ops[i];
      if (begin.kind != tir::Kind::FoldBegin) continue;
      for (int j = static_cast<int>(i) + 1; j < begin.match; ++j) {
        const tir::Op& op = k_.ops[static_cast<size_t>(j)];
        if (op.kind != tir::Kind::Dot || !mmaDot(op) || value(op.result).region != static_cast<int>(i)) continue;
        const auto directLoad = [&](int id) {
          const tir::Op* d = definer(id);
          if (!d || d->kind != tir::Kind::Load || uses_[static_cast<size_t>(id)] != 1 ||
              value(id).region != static_cast<int>(i))
            return -1;
          const tir::Operand& o = k_.operands[static_cast<size_t>(d->operand)];
          if (!isHalf(o.tensor.dtype()) || o.fill != 0.0 || o.block.size() != 2 || o.block[1] % 8 != 0) return -1;
          return defOp_[static_cast<size_t>(id)];
        };
        const int la = directLoad(op.args[0]), lb = directLoad(op.args[1]);
        if (la < 0 || lb < 0) continue;
        Pipeline p;
        p.dot = j;
        p.loadA = la;
        p.loadB = lb;
        const Shape &a = value(op.args[0]).shape, &b = value(op.args[1]).shape;
        p.aBytes = cudagen::sharedBlock(a[0], a[1]).bytes();
        p.stageBytes = p.aBytes + cudagen::sharedBlock(b[0], b[1]).bytes();
        p.offset = pipelineBytes_;
        pipelineBytes_ += p.stageBytes * k_.stages;
        if (tma_ && k_.stages <= 32 && layout(op.result).tc.wgmma && tmaOperand(la) && tmaOperand(lb)) {
          p.tma = true;
          p.barOffset = pipelineBytes_;
          pipelineBytes_ += (8 * k_.stages + 15) / 16 * 16;
          p.mapA = addTensorMap(la);
          p.mapB = addTensorMap(lb);
          p.tmaBytes = 2 * (a[0] * a[1] + b[0] * b[1]);
        }
        pipelines_[static_cast<int>(i)] = p;
        break;
      }
    }
  }

  // Whether TMA can load the operand of Load op `at`: rows of 16-byte multiples, unit column
  // stride, coordinates within int32, boxes of at most 256 rows (the pipeline checked the rest).
  bool tmaOperand(int at) const {
    const tir::Operand& o = k_.operands[static_cast<size_t>(k_.ops[static_cast<size_t>(at)].operand)];
    const Shape& shape = o.tensor.shape();
    return o.tensor.strides()[1] == 1 && o.tensor.strides()[0] * 2 % 16 == 0 && o.block[0] <= 256 &&
           shape[0] + o.block[0] < (int64_t{1} << 31) && shape[1] + o.block[1] < (int64_t{1} << 31);
  }
  // The tensor map of Load op `at`'s operand: boxes of one shared-memory panel (SharedBlock).
  int addTensorMap(int at) {
    const tir::Op& load = k_.ops[static_cast<size_t>(at)];
    const tir::Operand& o = k_.operands[static_cast<size_t>(load.operand)];
    const cudagen::SharedBlock block = cudagen::sharedBlock(o.block[0], o.block[1]);
    tensorMaps_.push_back({load.operand, o.block[0], int64_t{block.chunks} * 8, block.chunks == 1 ? 0 : block.chunks * 16});
    return static_cast<int>(tensorMaps_.size()) - 1;
  }

  const Pipeline* pipelineOfDot(int opIndex) const {
    for (const auto& [fold, p] : pipelines_)
      if (p.dot == opIndex) return &p;
    return nullptr;
  }
  bool pipelinedLoad(int opIndex) const {
    for (const auto& [fold, p] : pipelines_)
      if (p.loadA == opIndex || p.loadB == opIndex) return true;
    return false;
  }

  void line(const std::string& s) { body_ += std::string(2 * static_cast<size_t>(depth_), ' ') + s + "\n"; }
  void lines(const std::string& block) {
    size_t at = 0;
    while (at < block.size()) {
      const size_t end = block.find('\n', at);
      line(block.substr(at, end - at));
      at = end == std::string::npos ? block.size() : end + 1;
    }
  }
  void needWords(int64_t words) { generalWords_ = std::max(generalWords_, (words + 3) / 4 * 4); }

  std::string elementOf(const ValueLayout& l) const {
    if (l.mma)
      return "const int L = gz_mma_lin(t, e, " + std::to_string(l.tc.cols) + ", " + std::to_string(l.tc.wc) + ", " +
             std::to_string(l.tc.fm) + ", " + std::to_string(l.tc.fn) + (l.tc.wgmma ? ", true);" : ", false);");
    const Layout& b = l.blocked;
    return "const int L = gz_lin(t, e, " + std::to_string(b.rows) + ", " + std::to_string(b.cols) + ", " +
           std::to_string(b.vec) + ", " + std::to_string(b.threadRows) + ", " + std::to_string(b.threadCols) + ", " +
           std::to_string(b.colRepeats) + ");";
  }

  // A loop over the registers of a layout; in `body`, `e` is the register and `L` the element
  // (when `element`).
  void forRegisters(const ValueLayout& l, const std::string& body, bool element = true) {
    line("#pragma unroll");
    line("for (int e = 0; e < " + std::to_string(l.regs()) + "; ++e) {");
    if (element) line("  " + elementOf(l));
    line("  " + body);
    line("}");
  }

  void declare(int id) { line("float " + v(id) + "[" + std::to_string(layout(id).regs()) + "];"); }

  // Stores value id into shared memory at its row-major positions (from word `base`).
  void toShared(int id, int64_t base) {
    needWords(base + tir::elementCount(value(id).shape));
    forRegisters(layout(id), "if (L >= 0) gz_s[" + std::to_string(base) + " + L] = " + v(id) + "[e];");
  }

  // Value id ([rows, cols], F16/BF16 values) as 2-byte halves in shared memory from half `base`,
  // laid out as cudagen::sharedBlock says.
  void toSharedHalves(int id, int64_t base) {
    const Shape& s = value(id).shape;
    const cudagen::SharedBlock block = cudagen::sharedBlock(s[0], s[1]);
    usesHalves_ = true;
    needWords((base * 2 + block.bytes()) / 4);
    const std::string bits = (value(id).dtype == DType::F16 ? "gz_f2h(" : "gz_f2bf(") + v(id) + "[e])";
    const std::string cols = std::to_string(s[1]);
    forRegisters(layout(id), "if (L >= 0) gz_h[" + std::to_string(base) + " + gz_swz(L / " + cols + ", L % " + cols +
                                 " / 8, " + block.swizzleArgs() + ") / 2 + L % 8] = " + bits + ";");
  }

  // Value id in layout `to` of shape `toShape`: itself when it is already there, else a new
  // register array (a constant refilled, or a copy through shared memory that also broadcasts);
  // returns its name.
  std::string convert(int id, const ValueLayout& to, const Shape& toShape) {
    const Shape& from = value(id).shape;
    if (from == toShape && layout(id) == to) return v(id);
    const std::string name = std::string("b").append(std::to_string(id)) + "_" + std::to_string(temps_++);
    const tir::Op* d = definer(id);
    if (d && d->kind == tir::Kind::Full) {
      line("float " + name + "[" + std::to_string(to.regs()) + "];");
      forRegisters(to, name + "[e] = " + floatText(d->value) + ";", false);
      return name;
    }
    line("__syncthreads();");
    toShared(id, 0);
    line("__syncthreads();");
    line("float " + name + "[" + std::to_string(to.regs()) + "];");
    std::string index = "0";
    int64_t toStride = 1, fromStride = 1;
    for (size_t dim = toShape.size(); dim-- > 0;) {
      const size_t lead = toShape.size() - from.size();
      const int64_t n = dim < lead ? 1 : from[dim - lead];
      if (n != 1)
        index += " + (L / " + std::to_string(toStride) + " % " + std::to_string(toShape[dim]) + ") * " +
                 std::to_string(fromStride);
      toStride *= toShape[dim];
      fromStride *= n;
    }
    forRegisters(to, name + "[e] = L >= 0 ? gz_s[" + index + "] : 0.0f;");
    return name;
  }

  // Where a load or store element lies: `cond` holds when it is inside the tensor, `at` is its
  // offset and `last` its coordinate along the last axis (L is its place in the block).
  struct Access {
    std::string cond, at, last;
  };
  Access accessOf(const tir::Op& op, size_t firstIndex) const {
    const tir::Operand& o = k_.operands[static_cast<size_t>(op.operand)];
    const Shape& shape = o.tensor.shape();
    Access x{"L >= 0", "0", ""};
    int64_t inner = 1;
    std::vector<std::string> coords(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
      coords[d] = std::string("(").append(v(op.args[firstIndex + d])) + " * " + std::to_string(o.block[d]) + "LL + L / " +
                  std::to_string(inner) + " % " + std::to_string(o.block[d]) + ")";
      inner *= o.block[d];
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      x.cond += " && " + coords[d] + " >= 0 && " + coords[d] + " < " + std::to_string(shape[d]) + "LL";
      x.at += " + " + coords[d] + " * " + std::to_string(o.tensor.strides()[d]) + "LL";
    }
    x.last = coords.empty() ? "0" : coords.back();
    return x;
  }

  // The masked access of a load or store element: `inside` runs with `a`, the element's offset,
  // when the element is in the tensor, `outside` otherwise.
  std::string blockAccess(const tir::Op& op, size_t firstIndex, const std::string& inside, const std::string& outside) {
    const Access x = accessOf(op, firstIndex);
    return "if (" + x.cond + ") { const long long a = " + x.at + "; " + inside + " }" +
           (outside.empty() ? "" : " else { " + outside + " }");
  }

  // How many consecutive registers of layout l hold consecutive elements of a row (blocked: its
  // vectors; mma fragments: pairs of columns), when a tensor of `elementBytes` can move them in one
  // 4-, 8- or 16-byte access along a last axis of stride 1; else 1.
  static int vectorWidth(const ValueLayout& l, const tir::Operand& o, int elementBytes) {
    const Shape& shape = o.tensor.shape();
    if (shape.empty() || o.tensor.strides().back() != 1) return 1;
    int width = l.mma ? 2 : l.blocked.vec;
    while (width > 1 && (width * elementBytes < 4 || width * elementBytes > 16)) width /= 2;
    return width * elementBytes >= 4 ? width : 1;
  }

  // A load or store over layout l, `width` registers at a time: one vector access where all of
  // them are inside the tensor and the address is aligned, else each element masked on its own.
  // `vector` is the statement of the whole vector (with `a`, the first element's offset, and e0,
  // the first register), `element` and `outside` those of one element (with a and e).
  void accessLoop(const tir::Op& op, size_t firstIndex, const ValueLayout& l, int width, const std::string& vector,
                  const std::string& element, const std::string& outside) {
    if (width == 1) {
      forRegisters(l, blockAccess(op, firstIndex, element, outside));
      return;
    }
    const tir::Operand& o = k_.operands[static_cast<size_t>(op.operand)];
    const Access x = accessOf(op, firstIndex);
    const int bytes = width * static_cast<int>(dtypeSize(o.tensor.dtype()));
    const std::string w = std::to_string(width), tensor = "t" + std::to_string(op.operand);
    line("#pragma unroll");
    line("for (int e0 = 0; e0 < " + std::to_string(l.regs()) + "; e0 += " + w + ") {");
    line("  bool gz_whole = false;");
    line("  { const int e = e0; " + elementOf(l) + " if (" + x.cond + " && " + x.last + " + " + w + " <= " +
         std::to_string(o.tensor.shape().back()) + "LL) { const long long a = " + x.at + "; if ((((unsigned long long)(" +
         tensor + " + a)) & " + std::to_string(bytes - 1) + "ull) == 0ull) { " + vector + " gz_whole = true; } } }");
    line("  if (!gz_whole) {");
    line("    #pragma unroll");
    line("    for (int e = e0; e < e0 + " + w + "; ++e) { " + elementOf(l) + " " +
         blockAccess(op, firstIndex, element, outside) + " }");
    line("  }");
    line("}");
  }

  // A tensor element of dtype d (the expression e) as a tile's f32, and an f32 x as the element
  // (F16/BF16 as their bits, converted as the CPU does).
  static std::string fromElement(DType d, const std::string& e) {
    return d == DType::F16 ? "gz_h2f(" + e + ")" : d == DType::BF16 ? "gz_bf2f(" + e + ")"
           : d == DType::Bool ? "(" + e + " != 0 ? 1.0f : 0.0f)" : e;
  }
  static std::string toElement(DType d, const std::string& x) {
    return d == DType::F16 ? "gz_f2h(" + x + ")" : d == DType::BF16 ? "gz_f2bf(" + x + ")"
           : d == DType::Bool ? "(unsigned char)(" + x + " != 0.0f)" : x;
  }
  // The registers a load or store of layout l moves at once (Bool elements one at a time).
  static int accessWidth(const ValueLayout& l, const tir::Operand& o) {
    const DType d = o.tensor.dtype();
    return d == DType::Bool ? 1 : vectorWidth(l, o, static_cast<int>(dtypeSize(d)));
  }
  // One vector of `width` elements of dtype d staged in `gz_v`, and the type that moves its bytes.
  static std::string vectorBuffer(DType d, int width) {
    return std::string("__align__(16) ") + (d == DType::F32 ? "float" : "u16") + " gz_v[" + std::to_string(width) + "]; ";
  }
  static std::string vectorType(DType d, int width) {
    const size_t bytes = dtypeSize(d) * static_cast<size_t>(width);
    return bytes == 16 ? "uint4" : bytes == 8 ? "uint2" : "unsigned";
  }

  // The text of index value id with the fold counter `counter` replaced by `replacement` (the
  // index a later iteration of the fold computes).
  std::string indexAt(int id, int counter, const std::string& replacement) const {
    if (id == counter) return replacement;
    const tir::Op* d = definer(id);
    if (!d || value(id).region < 0) return v(id);
    switch (d->kind) {
      case tir::Kind::IndexAdd: case tir::Kind::IndexSub: case tir::Kind::IndexMul: {
        const char* sign = d->kind == tir::Kind::IndexAdd ? " + " : d->kind == tir::Kind::IndexSub ? " - " : " * ";
        return "(" + indexAt(d->args[0], counter, replacement) + sign + indexAt(d->args[1], counter, replacement) + ")";
      }
      case tir::Kind::IndexConst: return "(" + std::to_string(value(id).lo) + "LL)";
      case tir::Kind::ProgramId: return programId(*d);
      default: return v(id);  // an index from an enclosing body: defined before the fold began
    }
  }

  std::string programId(const tir::Op& op) const {
    // Grid points go row-major onto blockIdx.x (no limit of 65535 on the other axes).
    int64_t stride = 1;
    for (size_t a = static_cast<size_t>(op.axis) + 1; a < k_.grid.size(); ++a) stride *= k_.grid[a];
    return "((long long)blockIdx.x / " + std::to_string(stride) + "LL % " +
           std::to_string(k_.grid[static_cast<size_t>(op.axis)]) + "LL)";
  }

  // The copies of fold iteration `iteration` (an expression) of pipeline p into its buffer, as
  // one cp.async group (committed even when the iteration is past the end, so that every thread
  // counts the same groups).
  void issueStage(const tir::Op& begin, const Pipeline& p, const std::string& iteration) {
    if (p.tma) return issueTmaStage(begin, p, iteration);
    const std::string start = v(begin.args[0]), end = "(" + v(begin.args[0]) + " + " + v(begin.args[1]) + ")";
    line("{");
    ++depth_;
    line("const long long gz_k = " + iteration + ";");
    line("if (gz_k < " + end + ") {");
    ++depth_;
    line("unsigned char* const gz_buf = gz_pipe + " + std::to_string(p.offset) + "LL + (gz_k - " + start + ") % " +
         std::to_string(k_.stages) + " * " + std::to_string(p.stageBytes) + "LL;");
    for (int which = 0; which < 2; ++which) {
      const tir::Op& load = k_.ops[static_cast<size_t>(which == 0 ? p.loadA : p.loadB)];
      const tir::Operand& o = k_.operands[static_cast<size_t>(load.operand)];
      const std::string row0 = indexAt(load.args[0], begin.result, "gz_k") + " * " + std::to_string(o.block[0]) + "LL";
      const std::string col0 = indexAt(load.args[1], begin.result, "gz_k") + " * " + std::to_string(o.block[1]) + "LL";
      lines(cudagen::copyBlockAsync(o, "t" + std::to_string(load.operand), row0, col0,
                                    which == 0 ? "gz_buf" : "(gz_buf + " + std::to_string(p.aBytes) + ")", threads_));
    }
    --depth_;
    line("}");
    line("gz_cp_async_commit();");
    --depth_;
    line("}");
  }

  // The TMA copies of fold iteration `iteration` into its buffer: thread 0 arms the stage's
  // mbarrier with the bytes to come and asks for one box per shared-memory panel of each operand;
  // out-of-range elements arrive as zeros.
  void issueTmaStage(const tir::Op& begin, const Pipeline& p, const std::string& iteration) {
    const std::string start = v(begin.args[0]), end = "(" + v(begin.args[0]) + " + " + v(begin.args[1]) + ")";
    const std::string S = std::to_string(k_.stages);
    line("{");
    ++depth_;
    line("const long long gz_k = " + iteration + ";");
    line("if (t == 0 && gz_k < " + end + ") {");
    ++depth_;
    line("const unsigned gz_stage = (unsigned)((gz_k - " + start + ") % " + S + ");");
    line("const unsigned gz_buf = gz_saddr(gz_pipe) + " + std::to_string(p.offset) + "u + gz_stage * " +
         std::to_string(p.stageBytes) + "u;");
    line("const unsigned gz_bar = gz_saddr(gz_pipe) + " + std::to_string(p.barOffset) + "u + gz_stage * 8u;");
    line("gz_mbar_arrive_expect(gz_bar, " + std::to_string(p.tmaBytes) + "u);");
    for (int which = 0; which < 2; ++which) {
      const tir::Op& load = k_.ops[static_cast<size_t>(which == 0 ? p.loadA : p.loadB)];
      const tir::Operand& o = k_.operands[static_cast<size_t>(load.operand)];
      const int map = which == 0 ? p.mapA : p.mapB;
      const CudaKernel::TensorMap& m = tensorMaps_[static_cast<size_t>(map)];
      const cudagen::SharedBlock block = cudagen::sharedBlock(o.block[0], o.block[1]);
      const std::string row0 = indexAt(load.args[0], begin.result, "gz_k") + " * " + std::to_string(o.block[0]) + "LL";
      const std::string col0 = indexAt(load.args[1], begin.result, "gz_k") + " * " + std::to_string(o.block[1]) + "LL";
      for (int64_t panel = 0; panel * m.boxCols < o.block[1]; ++panel)
        line("gz_tma_load_2d(gz_buf + " + std::to_string((which == 0 ? 0 : p.aBytes) + panel * block.panelBytes()) +
             "u, gz_map" + std::to_string(map) + ", (int)(" + col0 + " + " + std::to_string(panel * m.boxCols) + "LL), (int)(" +
             row0 + "), gz_bar);");
    }
    --depth_;
    line("}");
    --depth_;
    line("}");
  }

  void emitDot(int at, const tir::Op& op) {
    const std::string r = v(op.result);
    const Shape &a = value(op.args[0]).shape, &b = value(op.args[1]).shape;
    const ValueLayout& out = layout(op.result);
    if (out.mma) {
      const bool f16 = value(op.args[0]).dtype == DType::F16;
      std::string sa, sb;
      if (const Pipeline* p = pipelineOfDot(at)) {
        // The buffer of this iteration: issue the one S - 1 ahead, wait until this one's copies
        // are done (all but the newest S - 1 groups), then make them visible to every thread.
        const tir::Op& begin = k_.ops[static_cast<size_t>(value(op.result).region)];
        const std::string counter = v(begin.result), start = v(begin.args[0]);
        issueStage(begin, *p, counter + " + " + std::to_string(k_.stages - 1));
        if (p->tma) {
          // The stage's mbarrier completes its phase when the boxes' bytes have landed; each
          // thread keeps the parity it waits for next, a bit per stage.
          const std::string phase = "gz_ph" + std::to_string(value(op.result).region);
          line("{ const unsigned gz_stage = (unsigned)((" + counter + " - " + start + ") % " + std::to_string(k_.stages) +
               "); gz_mbar_wait(gz_saddr(gz_pipe) + " + std::to_string(p->barOffset) + "u + gz_stage * 8u, (" + phase +
               " >> gz_stage) & 1u); " + phase + " ^= 1u << gz_stage; }");
        } else {
          line("gz_cp_async_wait<" + std::to_string(k_.stages - 1) + ">();");
          if (out.tc.wgmma) line("gz_fence_proxy_async();");
          line("__syncthreads();");
        }
        const std::string base = "gz_saddr(gz_pipe) + (unsigned)(" + std::to_string(p->offset) + "LL + (" + counter + " - " +
                                 start + ") % " + std::to_string(k_.stages) + " * " + std::to_string(p->stageBytes) + "LL)";
        sa = base;
        sb = base + " + " + std::to_string(p->aBytes) + "u";
      } else {
        line("__syncthreads();");
        toSharedHalves(op.args[0], 0);
        const int64_t bBase = cudagen::sharedBlock(a[0], a[1]).bytes() / 2;
        toSharedHalves(op.args[1], bBase);
        if (out.tc.wgmma) line("gz_fence_proxy_async();");
        line("__syncthreads();");
        sa = "gz_saddr(gz_h)";
        sb = "gz_saddr(gz_h + " + std::to_string(bBase) + ")";
      }
      line("float " + r + "[" + std::to_string(out.regs()) + "];");
      if (op.args.size() == 3) {
        const std::string acc = convert(op.args[2], out, value(op.result).shape);
        forRegisters(out, r + "[e] = " + acc + "[e];", false);
      } else {
        forRegisters(out, r + "[e] = 0.0f;", false);
      }
      if (out.tc.wgmma) {
        lines(cudagen::wgmmaLoop(out.tc, a[1], sa, sb, r, f16));
        wgmmaShapes_.emplace(static_cast<int>(b[1]), f16);
      } else {
        lines(cudagen::mmaLoop(out.tc, a[1], sa, sb, r, f16));
      }
      if (pipelineOfDot(at)) line("__syncthreads();");  // before the next copy reuses a buffer
      return;
    }
    // The fma loop, in the CPU's order (src/cpu/gemm.h): an fma chain from +0 over each block of
    // 256 k, the blocks' results added in order to the accumulator (or the first block's result).
    const std::string kk = std::to_string(a[1]), n = std::to_string(b[1]);
    line("__syncthreads();");
    toShared(op.args[0], 0);
    toShared(op.args[1], a[0] * a[1]);
    line("__syncthreads();");
    const bool acc = op.args.size() == 3;
    const std::string accName = acc ? convert(op.args[2], out, value(op.result).shape) : "";
    declare(op.result);
    forRegisters(out, "if (L >= 0) { const int row = L / " + n + ", col = L % " + n + "; float s = " +
                          (acc ? accName + "[e]" : "0.0f") + "; for (int k0 = 0; k0 < " + kk +
                          "; k0 += 256) { const int k1 = min(" + kk + ", k0 + 256); float c = 0.0f; for (int q = k0; q < k1; ++q) c = fmaf(gz_s[row * " +
                          kk + " + q], gz_s[" + std::to_string(a[0] * a[1]) + " + q * " + n + " + col], c); s = " +
                          (acc ? "s + c" : "k0 == 0 ? c : s + c") + "; } " + r + "[e] = s; }");
  }

  void emit(int at) {
    const tir::Op& op = k_.ops[static_cast<size_t>(at)];
    const std::string r = op.result >= 0 ? v(op.result) : "";
    switch (op.kind) {
      case tir::Kind::ProgramId: line("const long long " + r + " = " + programId(op) + ";"); break;
      case tir::Kind::IndexConst: line("const long long " + r + " = " + std::to_string(value(op.result).lo) + "LL;"); break;
      case tir::Kind::IndexAdd: line("const long long " + r + " = " + v(op.args[0]) + " + " + v(op.args[1]) + ";"); break;
      case tir::Kind::IndexSub: line("const long long " + r + " = " + v(op.args[0]) + " - " + v(op.args[1]) + ";"); break;
      case tir::Kind::IndexMul: line("const long long " + r + " = " + v(op.args[0]) + " * " + v(op.args[1]) + ";"); break;
      case tir::Kind::Full:
        declare(op.result);
        forRegisters(layout(op.result), r + "[e] = " + floatText(op.value) + ";", false);
        break;
      case tir::Kind::Load: {
        if (pipelinedLoad(at)) break;  // read by the pipeline's copies into shared memory
        const tir::Operand& o = k_.operands[static_cast<size_t>(op.operand)];
        const DType d = o.tensor.dtype();
        const std::string t = "t" + std::to_string(op.operand);
        declare(op.result);
        const ValueLayout& l = layout(op.result);
        const int width = accessWidth(l, o);
        // A vector's elements are converted one by one, as the scalar path does.
        const std::string vector = vectorBuffer(d, width) + "*(" + vectorType(d, width) + "*)gz_v = *(const " +
                                   vectorType(d, width) + "*)(" + t + " + a); for (int i = 0; i < " + std::to_string(width) +
                                   "; ++i) " + r + "[e0 + i] = " + fromElement(d, "gz_v[i]") + ";";
        accessLoop(op, 0, l, width, vector, r + "[e] = " + fromElement(d, t + "[a]") + ";",
                   r + "[e] = " + floatText(o.fill) + ";");
        break;
      }
      case tir::Kind::Store: {
        const tir::Operand& o = k_.operands[static_cast<size_t>(op.operand)];
        const DType d = o.tensor.dtype();
        const std::string t = "t" + std::to_string(op.operand), x = v(op.args[0]);
        const ValueLayout& l = layout(op.args[0]);
        const int width = accessWidth(l, o);
        const std::string vector = vectorBuffer(d, width) + "for (int i = 0; i < " + std::to_string(width) + "; ++i) gz_v[i] = " +
                                   toElement(d, x + "[e0 + i]") + "; *(" + vectorType(d, width) + "*)(" + t + " + a) = *(const " +
                                   vectorType(d, width) + "*)gz_v;";
        accessLoop(op, 1, l, width, vector, t + "[a] = " + toElement(d, x + "[e]") + ";", "");
        break;
      }
      case tir::Kind::Unary: case tir::Kind::Binary: case tir::Kind::Where: case tir::Kind::Cast: {
        const tir::Value& out = value(op.result);
        std::vector<std::string> in;
        for (int a : op.args) in.push_back(convert(a, layout(op.result), out.shape) + "[e]");
        // Tile values work in f32 (F32/F16/BF16/Bool): the f32 text of the GPU's elementwise kernels.
        std::string x = op.kind == tir::Kind::Unary    ? expr::unaryF32(op.unary, in[0])
                        : op.kind == tir::Kind::Binary ? expr::binaryF32(op.binary, in[0], in[1])
                        : op.kind == tir::Kind::Where  ? expr::select(in[0], in[1], in[2])
                                                       : in[0];
        declare(op.result);
        forRegisters(layout(op.result), r + "[e] = " + expr::roundF32(out.dtype, x) + ";", false);
        break;
      }
      case tir::Kind::Reduce: {
        // The CPU's order (src/cpu/reduce.h), so that sums give its bits: chunks of 4096 values;
        // in a chunk 16 lanes, value i into lane i % 16 in increasing i; the lanes combined
        // pairwise (l with l + 8, + 4, + 2, + 1); the chunks' results combined in order. The
        // block's threads first compute every (output, chunk, lane) partial side by side into
        // shared memory, then each output's thread combines its partials.
        const Shape& in = value(op.args[0]).shape;
        const auto axis = static_cast<size_t>(op.axis);
        int64_t inner = 1;
        for (size_t d = axis + 1; d < in.size(); ++d) inner *= in[d];
        const int64_t len = in[axis], chunks = (len + 4095) / 4096;
        const int64_t outputs = tir::elementCount(value(op.result).shape), partials = tir::elementCount(in);
        const std::string n = std::to_string(len), step = std::to_string(inner), c = std::to_string(chunks);
        const bool sum = op.reduction == tir::Reduction::Sum;
        const std::string start = sum ? "0.0f" : op.reduction == tir::Reduction::Max ? "-__int_as_float(0x7f800000)"
                                                                                        : "__int_as_float(0x7f800000)";
        const auto combine = [&](const std::string& a, const std::string& b) {
          return sum ? a + " + " + b : op.reduction == tir::Reduction::Max ? "gz_max(" + a + ", " + b + ")"
                                                                           : "gz_min(" + a + ", " + b + ")";
        };
        line("__syncthreads();");
        toShared(op.args[0], 0);
        needWords(partials + outputs * chunks * 16);
        line("__syncthreads();");
        line("for (int gz_w = t; gz_w < " + std::to_string(outputs * chunks * 16) + "; gz_w += " + std::to_string(threads_) +
             ") {");
        line("  const int o = gz_w / " + std::to_string(chunks * 16) + ", c = gz_w / 16 % " + c + ", base = o / " + step +
             " * " + n + " * " + step + " + o % " + step + ";");
        line("  float p = " + start + ";");
        line("  for (int j = c * 4096 + gz_w % 16; j < min(" + n + ", c * 4096 + 4096); j += 16) p = " +
             combine("p", "gz_s[base + j * " + step + "]") + ";");
        line("  gz_s[" + std::to_string(partials) + " + gz_w] = p;");
        line("}");
        line("__syncthreads();");
        declare(op.result);
        forRegisters(layout(op.result),
                     "if (L >= 0) { float s = 0.0f; for (int c = 0; c < " + c + "; ++c) { float q[16]; for (int l = 0; l < 16; ++l) q[l] = gz_s[" +
                         std::to_string(partials) + " + (L * " + c + " + c) * 16 + l]; for (int w = 8; w >= 1; w >>= 1) for (int l = 0; l < w; ++l) q[l] = " +
                         combine("q[l]", "q[l + w]") + "; s = c == 0 ? q[0] : " + combine("s", "q[0]") + "; } " + r + "[e] = " +
                         expr::roundF32(value(op.result).dtype, "s") + "; }");
        break;
      }
      case tir::Kind::Dot: emitDot(at, op); break;
      case tir::Kind::FoldBegin: {
        const ValueLayout& accLayout = layout(op.result2);
        const std::string acc = v(op.result2), n = std::to_string(accLayout.regs());
        const std::string init = convert(op.args[2], accLayout, value(op.result2).shape);
        line("float " + acc + "[" + n + "];");
        line("#pragma unroll");
        line("for (int e = 0; e < " + n + "; ++e) " + acc + "[e] = " + init + "[e];");
        const auto p = pipelines_.find(at);
        if (p != pipelines_.end()) {
          // The pipeline's first S - 1 stages, read ahead before the loop.
          line("// " + std::to_string(k_.stages) + (p->second.tma ? "-stage TMA" : "-stage cp.async") +
               " pipeline of the product's operands");
          for (int s = 0; s + 1 < k_.stages; ++s) issueStage(op, p->second, v(op.args[0]) + " + " + std::to_string(s));
        }
        line("for (long long " + r + " = " + v(op.args[0]) + "; " + r + " < " + v(op.args[0]) + " + " + v(op.args[1]) +
             "; ++" + r + ") {");
        ++depth_;
        break;
      }
      case tir::Kind::FoldEnd: {
        const tir::Op& begin = k_.ops[static_cast<size_t>(op.match)];
        const ValueLayout& accLayout = layout(begin.result2);
        const std::string acc = v(begin.result2), n = std::to_string(accLayout.regs());
        if (op.args[0] != begin.result2) {
          const std::string next = convert(op.args[0], accLayout, value(begin.result2).shape);
          line("#pragma unroll");
          line("for (int e = 0; e < " + n + "; ++e) " + acc + "[e] = " + next + "[e];");
        }
        --depth_;
        line("}");
        if (const auto p = pipelines_.find(op.match); p != pipelines_.end() && !p->second.tma) line("gz_cp_async_wait<0>();");
        line("float " + r + "[" + n + "];");
        line("#pragma unroll");
        line("for (int e = 0; e < " + n + "; ++e) " + r + "[e] = " + acc + "[e];");
        break;
      }
    }
  }

  const tir::Kernel& k_;
  int arch_;  // the target's compute capability, major * 10 + minor
  bool tma_;  // pipelines may load through TMA (the launcher checked the operands' alignment)
  std::vector<CudaKernel::TensorMap> tensorMaps_;
  int warps_, threads_;
  std::vector<int> defOp_, uses_;
  std::vector<ValueLayout> layouts_;
  std::map<int, Pipeline> pipelines_;  // by FoldBegin op
  int64_t pipelineBytes_ = 0;  // at the start of gz_smem
  int64_t generalWords_ = 0;   // after the pipelines: staging, broadcasts, reductions
  bool usesMma_ = false, usesHalves_ = false;
  std::set<std::pair<int, bool>> wgmmaShapes_;  // the gz_wgmma<N, F16> the kernel calls
  std::string body_;
  int depth_ = 1;
  int temps_ = 0;
};

}  // namespace

CudaKernel generateCuda(const tir::Kernel& k, int arch, bool tma) { return Codegen(k, arch, tma).generate(); }

CudaPlan planCuda(const tir::Kernel& k, int arch) {
  Codegen g(k, arch, false);
  CudaPlan plan;
  plan.kernel = g.generate();
  for (size_t id = 0; id < k.values.size(); ++id) plan.valueLayouts.push_back(g.layoutText(static_cast<int>(id)));
  for (size_t i = 0; i < k.ops.size(); ++i) plan.opNotes.push_back(g.sharedNote(static_cast<int>(i)));
  return plan;
}

CudaKernel cuda(const Grid& grid, const Body& body, int arch, bool tma) {
  return generateCuda(trace(grid, body), arch, tma);
}

}  // namespace gizml::tile
