// Tile::cuda: CUDA C++ from the tile IR. One thread block per grid point; each tile value is a
// register array in its blocked layout (src/tile/layout.h), indices are uniform scalars, values
// cross threads through dynamic shared memory between barriers, and loads and stores are masked
// at the tensor's edges. A fold is a loop; barriers inside it are reached by every thread.
#include <gizml/tile.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>

#include "tile/layout.h"

namespace gizml::tile {
namespace {

using tensor::BinaryOp;
using tensor::UnaryOp;

// Helpers shared by every generated kernel; the guard lets several kernels share one file.
constexpr const char* kHelpers = R"(#ifndef GIZML_TILE_HELPERS
#define GIZML_TILE_HELPERS
// The element of a [rows, cols] tile in register e of thread t (-1: none); src/tile/layout.h.
__device__ __forceinline__ int gz_lin(int t, int e, int rows, int cols, int vec, int tr, int tc, int cr) {
  if (t >= tr * tc) return -1;
  const int row = (e / (cr * vec)) * tr + t / tc;
  const int col = (((e / vec) % cr) * tc + t % tc) * vec + e % vec;
  return row < rows && col < cols ? row * cols + col : -1;
}
__device__ __forceinline__ float gz_min(float a, float b) { return a != a ? a : b != b ? b : fminf(a, b); }
__device__ __forceinline__ float gz_max(float a, float b) { return a != a ? a : b != b ? b : fmaxf(a, b); }
__device__ __forceinline__ float gz_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float gz_mod(float a, float b) {
  float r = fmodf(a, b);
  if (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) r += b;
  return r == 0.0f ? copysignf(0.0f, b) : r;
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
    case DType::F16: return "__half";
    case DType::BF16: return "__nv_bfloat16";
    case DType::Bool: return "unsigned char";
    default: return "float";
  }
}

// x (a float expression) rounded to what dtype holds.
std::string rounded(const std::string& x, DType d) {
  switch (d) {
    case DType::F16: return "__half2float(__float2half_rn(" + x + "))";
    case DType::BF16: return "__bfloat162float(__float2bfloat16_rn(" + x + "))";
    case DType::Bool: return "((" + x + ") != 0.0f ? 1.0f : 0.0f)";
    default: return x;
  }
}

std::string unaryText(UnaryOp op, const std::string& x) {
  switch (op) {
    case UnaryOp::Neg: return "-" + x;
    case UnaryOp::Abs: return "fabsf(" + x + ")";
    case UnaryOp::Exp: return "expf(" + x + ")";
    case UnaryOp::Log: return "logf(" + x + ")";
    case UnaryOp::Sqrt: return "sqrtf(" + x + ")";
    case UnaryOp::Rsqrt: return "1.0f / sqrtf(" + x + ")";
    case UnaryOp::Sin: return "sinf(" + x + ")";
    case UnaryOp::Cos: return "cosf(" + x + ")";
    case UnaryOp::Tanh: return "tanhf(" + x + ")";
    case UnaryOp::Sigmoid: return "gz_sigmoid(" + x + ")";
    case UnaryOp::Relu: return x + " < 0.0f ? 0.0f : " + x;
    case UnaryOp::Silu: return x + " * gz_sigmoid(" + x + ")";
    case UnaryOp::GeluErf: return "0.5f * " + x + " * erfcf(" + x + " * -0.70710678f)";
    case UnaryOp::GeluTanh:
      return x + " * gz_sigmoid(1.5957691216f * (" + x + " + 0.044715f * " + x + " * " + x + " * " + x + "))";
    case UnaryOp::Floor: return "floorf(" + x + ")";
    case UnaryOp::Ceil: return "ceilf(" + x + ")";
    case UnaryOp::Round: return "rintf(" + x + ")";
    case UnaryOp::Sign: return x + " > 0.0f ? 1.0f : " + x + " < 0.0f ? -1.0f : " + x + " != " + x + " ? " + x + " : 0.0f";
    case UnaryOp::Not: return x + " == 0.0f ? 1.0f : 0.0f";
  }
  return x;
}

std::string binaryText(BinaryOp op, const std::string& a, const std::string& b) {
  const auto compare = [&](const char* c) { return "(" + a + " " + c + " " + b + ") ? 1.0f : 0.0f"; };
  switch (op) {
    case BinaryOp::Add: return a + " + " + b;
    case BinaryOp::Sub: return a + " - " + b;
    case BinaryOp::Mul: return a + " * " + b;
    case BinaryOp::Div: return a + " / " + b;
    case BinaryOp::Pow: return "powf(" + a + ", " + b + ")";
    case BinaryOp::Min: return "gz_min(" + a + ", " + b + ")";
    case BinaryOp::Max: return "gz_max(" + a + ", " + b + ")";
    case BinaryOp::Mod: return "gz_mod(" + a + ", " + b + ")";
    case BinaryOp::Eq: return compare("==");
    case BinaryOp::Ne: return compare("!=");
    case BinaryOp::Lt: return compare("<");
    case BinaryOp::Le: return compare("<=");
    case BinaryOp::Gt: return compare(">");
    case BinaryOp::Ge: return compare(">=");
    case BinaryOp::And: return "(" + a + " != 0.0f && " + b + " != 0.0f) ? 1.0f : 0.0f";
    case BinaryOp::Or: return "(" + a + " != 0.0f || " + b + " != 0.0f) ? 1.0f : 0.0f";
  }
  return a;
}

class Codegen {
 public:
  explicit Codegen(const tir::Kernel& k) : k_(k), threads_(32 * warpsFor(k)) {
    for (const tir::Op& op : k.ops) sharedWords_ = std::max(sharedWords_, staging(k, op).words);
  }

  CudaKernel generate() {
    for (const tir::Op& op : k_.ops) emit(op);
    std::string params;
    bool halves = false;
    for (size_t i = 0; i < k_.operands.size(); ++i) {
      const tir::Operand& o = k_.operands[i];
      halves = halves || o.tensor.dtype() == DType::F16 || o.tensor.dtype() == DType::BF16;
      params += std::string(i ? ", " : "") + (o.write ? "" : "const ") + elementType(o.tensor.dtype()) +
                "* __restrict__ t" + std::to_string(i);
    }
    for (const tir::Value& value : k_.values) halves = halves || value.dtype == DType::F16 || value.dtype == DType::BF16;

    std::string head = "  const int t = threadIdx.x;\n";
    if (sharedWords_) head += "  extern __shared__ float gz_smem[];\n";

    CudaKernel out;
    out.threads = threads_;
    out.blocks = tir::gridPoints(k_.grid);
    out.sharedBytes = sharedWords_ * 4;
    const std::string signature = "(" + params + ") {\n" + head + body_ + "}\n";
    out.name = "gizml_tile_" + hashText(signature);
    out.source = "// Generated by gizml::tile (src/tile/cuda_codegen.cpp): grid " + tensor::shapeText(k_.grid) +
                 ", " + std::to_string(threads_) + " threads, " + std::to_string(out.sharedBytes) +
                 " bytes of dynamic shared memory.\n" +
                 (halves ? "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n" : "") + kHelpers +
                 "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(threads_) + ") " + out.name +
                 signature;
    return out;
  }

 private:
  static std::string hashText(const std::string& s) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
  }

  const tir::Value& value(int id) const { return k_.values[static_cast<size_t>(id)]; }
  Layout layout(int id) const { return blockedLayout(value(id).shape, threads_); }

  void line(const std::string& s) { body_ += std::string(2 * static_cast<size_t>(depth_), ' ') + s + "\n"; }

  // A loop over the registers of a layout; in `body`, `e` is the register and `L` the element
  // (when `element`).
  void forRegisters(const Layout& l, const std::string& body, bool element = true) {
    line("#pragma unroll");
    line("for (int e = 0; e < " + std::to_string(l.regs()) + "; ++e) {");
    if (element)
      line("  const int L = gz_lin(t, e, " + std::to_string(l.rows) + ", " + std::to_string(l.cols) + ", " +
         std::to_string(l.vec) + ", " + std::to_string(l.threadRows) + ", " + std::to_string(l.threadCols) +
         ", " + std::to_string(l.colRepeats) + ");");
    line("  " + body);
    line("}");
  }

  void declare(int id) { line("float " + v(id) + "[" + std::to_string(layout(id).regs()) + "];"); }

  // Stores value id into shared memory at its row-major positions (from word `base`).
  void toShared(int id, int64_t base) {
    forRegisters(layout(id), "if (L >= 0) gz_smem[" + std::to_string(base) + " + L] = " + v(id) + "[e];");
  }

  // Operand id in the layout of shape `to`: itself, or broadcast through shared memory into a
  // new register array; returns its name.
  std::string operand(int id, const Shape& to) {
    const Shape& from = value(id).shape;
    if (from == to) return v(id);
    line("__syncthreads();");
    toShared(id, 0);
    line("__syncthreads();");
    const std::string name = std::string("b").append(std::to_string(id)) + "_" + std::to_string(temps_++);
    const Layout l = blockedLayout(to, threads_);
    line("float " + name + "[" + std::to_string(l.regs()) + "];");
    std::string index = "0";
    int64_t toStride = 1, fromStride = 1;
    for (size_t d = to.size(); d-- > 0;) {
      const size_t lead = to.size() - from.size();
      const int64_t n = d < lead ? 1 : from[d - lead];
      if (n != 1)
        index += " + (L / " + std::to_string(toStride) + " % " + std::to_string(to[d]) + ") * " + std::to_string(fromStride);
      toStride *= to[d];
      fromStride *= n;
    }
    forRegisters(l, name + "[e] = L >= 0 ? gz_smem[" + index + "] : 0.0f;");
    return name;
  }

  // The masked access of a load or store element: `inside` runs with `a`, the element's offset,
  // when the element is in the tensor, `outside` otherwise.
  std::string blockAccess(const tir::Op& op, size_t firstIndex, const std::string& inside, const std::string& outside) {
    const tir::Operand& o = k_.operands[static_cast<size_t>(op.operand)];
    const Shape& shape = o.tensor.shape();
    std::string cond = "L >= 0", at = "0";
    int64_t inner = 1;
    std::vector<std::string> coords(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
      coords[d] = std::string("(").append(v(op.args[firstIndex + d])) + " * " + std::to_string(o.block[d]) + "LL + L / " +
                  std::to_string(inner) + " % " + std::to_string(o.block[d]) + ")";
      inner *= o.block[d];
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      cond += " && " + coords[d] + " >= 0 && " + coords[d] + " < " + std::to_string(shape[d]) + "LL";
      at += " + " + coords[d] + " * " + std::to_string(o.tensor.strides()[d]) + "LL";
    }
    return "if (" + cond + ") { const long long a = " + at + "; " + inside + " }" + (outside.empty() ? "" : " else { " + outside + " }");
  }

  void emit(const tir::Op& op) {
    const std::string r = op.result >= 0 ? v(op.result) : "";
    switch (op.kind) {
      case tir::Kind::ProgramId: {
        // Grid points go row-major onto blockIdx.x (no limit of 65535 on the other axes).
        int64_t stride = 1;
        for (size_t a = static_cast<size_t>(op.axis) + 1; a < k_.grid.size(); ++a) stride *= k_.grid[a];
        line("const long long " + r + " = (long long)blockIdx.x / " + std::to_string(stride) + "LL % " +
             std::to_string(k_.grid[static_cast<size_t>(op.axis)]) + "LL;");
        break;
      }
      case tir::Kind::IndexConst: line("const long long " + r + " = " + std::to_string(value(op.result).lo) + "LL;"); break;
      case tir::Kind::IndexAdd: line("const long long " + r + " = " + v(op.args[0]) + " + " + v(op.args[1]) + ";"); break;
      case tir::Kind::IndexSub: line("const long long " + r + " = " + v(op.args[0]) + " - " + v(op.args[1]) + ";"); break;
      case tir::Kind::IndexMul: line("const long long " + r + " = " + v(op.args[0]) + " * " + v(op.args[1]) + ";"); break;
      case tir::Kind::Full:
        declare(op.result);
        forRegisters(layout(op.result), r + "[e] = " + floatText(op.value) + ";", false);
        break;
      case tir::Kind::Load: {
        const tir::Operand& o = k_.operands[static_cast<size_t>(op.operand)];
        const DType d = o.tensor.dtype();
        const std::string element = "t" + std::to_string(op.operand) + "[a]";
        const std::string load = d == DType::F16 ? "__half2float(" + element + ")"
                                 : d == DType::BF16 ? "__bfloat162float(" + element + ")"
                                 : d == DType::Bool ? "(" + element + " != 0 ? 1.0f : 0.0f)"
                                                    : element;
        declare(op.result);
        forRegisters(layout(op.result), blockAccess(op, 0, r + "[e] = " + load + ";", r + "[e] = " + floatText(o.fill) + ";"));
        break;
      }
      case tir::Kind::Store: {
        const tir::Operand& o = k_.operands[static_cast<size_t>(op.operand)];
        const DType d = o.tensor.dtype();
        const std::string x = v(op.args[0]) + "[e]";
        const std::string store = d == DType::F16 ? "__float2half_rn(" + x + ")"
                                  : d == DType::BF16 ? "__float2bfloat16_rn(" + x + ")"
                                  : d == DType::Bool ? "(unsigned char)(" + x + " != 0.0f)"
                                                     : x;
        forRegisters(layout(op.args[0]), blockAccess(op, 1, "t" + std::to_string(op.operand) + "[a] = " + store + ";", ""));
        break;
      }
      case tir::Kind::Unary: case tir::Kind::Binary: case tir::Kind::Where: case tir::Kind::Cast: {
        const tir::Value& out = value(op.result);
        std::vector<std::string> in;
        for (int a : op.args) in.push_back(operand(a, out.shape) + "[e]");
        std::string x = op.kind == tir::Kind::Unary ? unaryText(op.unary, in[0])
                        : op.kind == tir::Kind::Binary ? binaryText(op.binary, in[0], in[1])
                        : op.kind == tir::Kind::Where ? in[0] + " != 0.0f ? " + in[1] + " : " + in[2]
                                                      : in[0];
        declare(op.result);
        forRegisters(layout(op.result), r + "[e] = " + rounded(x, out.dtype) + ";", false);
        break;
      }
      case tir::Kind::Reduce: {
        const Shape& in = value(op.args[0]).shape;
        const auto axis = static_cast<size_t>(op.axis);
        int64_t inner = 1;
        for (size_t d = axis + 1; d < in.size(); ++d) inner *= in[d];
        const std::string len = std::to_string(in[axis]), step = std::to_string(inner);
        const std::string combine = op.reduction == tir::Reduction::Sum ? "s += x;"
                                    : op.reduction == tir::Reduction::Max ? "s = gz_max(s, x);" : "s = gz_min(s, x);";
        line("__syncthreads();");
        toShared(op.args[0], 0);
        line("__syncthreads();");
        declare(op.result);
        forRegisters(layout(op.result),
                     "if (L >= 0) { const int base = L / " + step + " * " + len + " * " + step + " + L % " + step +
                         "; float s = gz_smem[base]; for (int j = 1; j < " + len + "; ++j) { const float x = gz_smem[base + j * " +
                         step + "]; " + combine + " } " + r + "[e] = " + rounded("s", value(op.result).dtype) + "; }");
        break;
      }
      case tir::Kind::Dot: {
        const Shape &a = value(op.args[0]).shape, &b = value(op.args[1]).shape;
        const std::string kk = std::to_string(a[1]), n = std::to_string(b[1]);
        line("__syncthreads();");
        toShared(op.args[0], 0);
        toShared(op.args[1], a[0] * a[1]);
        line("__syncthreads();");
        declare(op.result);
        const std::string init = op.args.size() == 3 ? v(op.args[2]) + "[e]" : "0.0f";
        forRegisters(layout(op.result),
                     "if (L >= 0) { const int row = L / " + n + ", col = L % " + n + "; float s = " + init +
                         "; for (int q = 0; q < " + kk + "; ++q) s = fmaf(gz_smem[row * " + kk + " + q], gz_smem[" +
                         std::to_string(a[0] * a[1]) + " + q * " + n + " + col], s); " + r + "[e] = s; }");
        break;
      }
      case tir::Kind::FoldBegin: {
        const std::string acc = v(op.result2), n = std::to_string(layout(op.result2).regs());
        line("float " + acc + "[" + n + "];");
        line("for (int e = 0; e < " + n + "; ++e) " + acc + "[e] = " + v(op.args[2]) + "[e];");
        line("for (long long " + r + " = " + v(op.args[0]) + "; " + r + " < " + v(op.args[0]) + " + " + v(op.args[1]) +
             "; ++" + r + ") {");
        ++depth_;
        break;
      }
      case tir::Kind::FoldEnd: {
        const tir::Op& begin = k_.ops[static_cast<size_t>(op.match)];
        const std::string acc = v(begin.result2), n = std::to_string(layout(op.result).regs());
        if (op.args[0] != begin.result2) line("for (int e = 0; e < " + n + "; ++e) " + acc + "[e] = " + v(op.args[0]) + "[e];");
        --depth_;
        line("}");
        line("float " + r + "[" + n + "];");
        line("for (int e = 0; e < " + n + "; ++e) " + r + "[e] = " + acc + "[e];");
        break;
      }
    }
  }

  const tir::Kernel& k_;
  int threads_;
  int64_t sharedWords_ = 0;
  std::string body_;
  int depth_ = 1;
  int temps_ = 0;
};

}  // namespace

CudaKernel cuda(const Grid& grid, const Body& body) {
  const tir::Kernel k = trace(grid, body);
  return Codegen(k).generate();
}

}  // namespace gizml::tile
