// The elementwise code generator: a Lazy expression becomes one CUDA kernel.
#include <cstring>
#include <unordered_map>

#include "cpu/convert.h"
#include "tensor/gpu/codegen.h"
#include "tensor/gpu/cuda_expr.h"
#include "tensor/shape_util.h"

namespace gizml::gpuops {
namespace {

using gizml::DType;
using gizml::tensor::BinaryOp;
using gizml::tensor::Lazy;
using gizml::tensor::Shape;
using Kind = Lazy::Node::Kind;

bool worksInF32(DType t) { return gizml::cpu::worksInF32(t); }

std::string load(DType t, const std::string& pointer, const std::string& offset) {
  const std::string at = "[" + offset + "]";
  switch (t) {
    case DType::F32: return "((const float*)" + pointer + ")" + at;
    case DType::F16: return "gz_h2f(((const u16*)" + pointer + ")" + at + ")";
    case DType::BF16: return "gz_bf2f(((const u16*)" + pointer + ")" + at + ")";
    case DType::Bool: return "(((const u8*)" + pointer + ")" + at + " ? 1.0f : 0.0f)";
    case DType::I8: return "(i64)((const i8*)" + pointer + ")" + at;
    case DType::U8: return "(i64)((const u8*)" + pointer + ")" + at;
    case DType::I32: return "(i64)((const int*)" + pointer + ")" + at;
    case DType::I64: return "((const i64*)" + pointer + ")" + at;
    case DType::F64: case DType::I4: break;  // Lazy::eval rejects both on a GPU before this
  }
  throw Error(std::string("elementwise on the GPU: no kernel for dtype ") + dtypeName(t));
}

std::string store(DType t, const std::string& value) {
  switch (t) {
    case DType::F32: return "((float*)p.out)[i] = " + value + ";";
    case DType::F16: return "((u16*)p.out)[i] = gz_f2h(" + value + ");";
    case DType::BF16: return "((u16*)p.out)[i] = gz_f2bf(" + value + ");";
    case DType::Bool: return "((u8*)p.out)[i] = " + value + " != 0.0f;";
    case DType::I8: return "((i8*)p.out)[i] = (i8)" + value + ";";
    case DType::U8: return "((u8*)p.out)[i] = (u8)" + value + ";";
    case DType::I32: return "((int*)p.out)[i] = (int)" + value + ";";
    case DType::I64: return "((i64*)p.out)[i] = " + value + ";";
    case DType::F64: case DType::I4: break;
  }
  throw Error(std::string("elementwise on the GPU: no kernel for dtype ") + dtypeName(t));
}

uint64_t scalarBits(const Lazy::Node& node) {
  if (worksInF32(node.dtype)) {
    const float v = gizml::doubleToWorkingF32(node.value, node.dtype);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return bits;
  }
  // As the CPU's fillScalar: through f32 with the dtype's cast, exact integers kept exact.
  int64_t v;
  const float asFloat = static_cast<float>(node.value);
  gizml::cpu::castF32ToI64(node.dtype, &asFloat, 1, &v);
  if (static_cast<double>(static_cast<int64_t>(node.value)) == node.value) v = static_cast<int64_t>(node.value);
  gizml::cpu::wrapI64To(node.dtype, &v, 1);
  return static_cast<uint64_t>(v);
}

struct Generator {
  ElementwisePlan& plan;
  bool epilogue = false;  // the product's value is the argument `acc`
  std::unordered_map<const Lazy::Node*, std::string> names;
  std::string body;
  int scalars = 0;

  std::string visit(const Lazy::Node* node) {
    if (auto it = names.find(node); it != names.end()) return it->second;
    std::vector<std::string> in;
    for (const auto& input : node->inputs) in.push_back(visit(input.get()));
    std::string name = std::to_string(names.size());
    name.insert(name.begin(), 'v');
    const bool f32 = worksInF32(node->dtype);
    std::string value;
    switch (node->kind) {
      case Kind::Leaf: {
        const size_t k = plan.leaves.size();
        plan.leaves.push_back(node);
        const std::string pointer = "p.l" + std::to_string(k);
        value = load(node->tensor.dtype(), pointer, "off" + std::to_string(k));
        break;
      }
      case Kind::Scalar: {
        const std::string slot = "p.s" + std::to_string(scalars++);
        plan.scalarBits.push_back(scalarBits(*node));
        value = std::string(f32 ? "__uint_as_float((u32)" : "(i64)(") + slot + ")";
        break;
      }
      case Kind::Unary:
        value = f32 ? roundF32(node->dtype, unaryF32(node->unaryOp, in[0])) : wrapI64(node->dtype, unaryI64(node->unaryOp, in[0]));
        break;
      case Kind::Binary: {
        const bool inputsF32 = worksInF32(node->inputs[0]->dtype);
        if (gizml::tensor::isComparison(node->binaryOp) || node->binaryOp == BinaryOp::And || node->binaryOp == BinaryOp::Or) {
          value = inputsF32 ? binaryF32(node->binaryOp, in[0], in[1]) : compareI64(node->binaryOp, in[0], in[1]);
        } else if (f32) {
          value = roundF32(node->dtype, binaryF32(node->binaryOp, in[0], in[1]));
        } else {
          value = wrapI64(node->dtype, binaryI64(node->binaryOp, in[0], in[1]));
        }
        break;
      }
      case Kind::Where:
        value = select(in[0], in[1], in[2]);
        break;
      case Kind::Product:  // an epilogue's value from the product's store (planEpilogue)
        if (!epilogue) throw Error("elementwise on the GPU: a deferred product reached the code generator");
        value = "acc";
        break;
      case Kind::Cast: {
        const bool fromF32 = worksInF32(node->inputs[0]->dtype);
        if (fromF32 && f32) value = roundF32(node->dtype, in[0]);
        else if (fromF32) value = castF32ToInt(node->dtype, in[0]);
        else if (f32) value = castIntToF32(node->dtype, in[0]);
        else value = wrapI64(node->dtype, in[0]);
        break;
      }
    }
    body += std::string("    const ") + (f32 ? "float " : "i64 ") + name + " = " + value + ";\n";
    names[node] = name;
    return name;
  }
};

// The coalesced axes of the output (as the CPU evaluator takes them), and each leaf's walk:
// contiguous, broadcast (all strides 0) or strided.
void coalesce(const Shape& shape, ElementwisePlan& plan) {
  std::vector<Shape> strides;
  for (const auto* leaf : plan.leaves)
    strides.push_back(gizml::tensor::broadcastStrides(leaf->tensor.shape(), leaf->tensor.strides(), shape));
  gizml::tensor::Coalesced merged = gizml::tensor::coalesceAxes(shape, strides);
  plan.dims = std::move(merged.dims);
  plan.leafStrides = std::move(merged.strides);
  const Shape contiguous = gizml::tensor::contiguousStrides(plan.dims);
  for (const Shape& s : plan.leafStrides) {
    bool zero = true;
    for (int64_t v : s) zero = zero && v == 0;
    plan.leafKind.push_back(s == contiguous ? 'C' : zero ? 'Z' : 'S');
  }
}

}  // namespace

namespace {

// The parameter block P and gz_element(p, i), which computes and stores output element i (in an
// epilogue, gz_element(p, i, acc) with the product's value acc).
std::string elementSource(const Lazy::Node& root, ElementwisePlan& plan, bool epilogue) {
  Generator gen{plan, epilogue, {}, {}, 0};
  const std::string result = gen.visit(&root);
  coalesce(root.shape, plan);
  plan.numel = gizml::tensor::elementCount(root.shape);
  const size_t rank = plan.dims.size();
  const std::string r = std::to_string(rank);

  // The text keeps this file's former path: kernel caches are keyed by the source.
  std::string s = "\n// A generated elementwise kernel (src/gpu/codegen_elementwise.cpp).\nstruct P {\n  u64 out;\n  i64 n;\n";
  s += "  i64 dims[" + r + "];\n";
  bool strided = false;
  for (size_t k = 0; k < plan.leaves.size(); ++k) {
    s += "  u64 l" + std::to_string(k) + ";\n";
    if (plan.leafKind[k] == 'S') {
      s += "  i64 st" + std::to_string(k) + "[" + r + "];\n";
      strided = true;
    }
  }
  for (size_t k = 0; k < plan.scalarBits.size(); ++k) s += "  u64 s" + std::to_string(k) + ";\n";
  s += std::string("};\n__device__ __forceinline__ void gz_element(const P& p, i64 i") + (epilogue ? ", float acc" : "") + ") {\n";
  if (strided) {
    s += "  i64 c[" + r + "];\n  i64 rest = i;\n";
    s += "  for (int d = " + std::to_string(rank - 1) + "; d >= 0; --d) { c[d] = rest % p.dims[d]; rest /= p.dims[d]; }\n";
  }
  for (size_t k = 0; k < plan.leaves.size(); ++k) {
    const std::string kk = std::to_string(k);
    if (plan.leafKind[k] == 'C') {
      s += "  const i64 off" + kk + " = i;\n";
    } else if (plan.leafKind[k] == 'Z') {
      s += "  const i64 off" + kk + " = 0;\n";
    } else {
      s += "  i64 off" + kk + " = 0;\n  for (int d = 0; d < " + r + "; ++d) off" + kk + " += c[d] * p.st" + kk + "[d];\n";
    }
  }
  s += "  {\n" + gen.body + "    " + store(root.dtype, result) + "\n  }\n}\n";
  return s;
}

}  // namespace

ElementwisePlan planElementwise(const Lazy::Node& root) {
  ElementwisePlan plan;
  std::string s = preludeSource() + elementSource(root, plan, false);
  s += std::string("extern \"C\" __global__ void __launch_bounds__(256) ") + kElementwiseKernel + "(P p) {\n";
  s += "  const i64 step = (i64)gridDim.x * blockDim.x * 4;\n";
  s += "  for (i64 base = (i64)blockIdx.x * blockDim.x * 4 + threadIdx.x; base < p.n; base += step) {\n";
  s += "#pragma unroll\n    for (int u = 0; u < 4; ++u) {\n";
  s += "      const i64 i = base + (i64)u * blockDim.x;\n      if (i < p.n) gz_element(p, i);\n    }\n  }\n}\n";
  plan.source = std::move(s);
  return plan;
}

ElementwisePlan planEpilogue(const Lazy::Node& root) {
  ElementwisePlan plan;
  plan.source = elementSource(root, plan, true);
  return plan;
}

std::vector<uint64_t> elementwiseParams(const ElementwisePlan& plan, uint64_t out, const std::vector<uint64_t>& leaves) {
  std::vector<uint64_t> p;
  p.push_back(out);
  p.push_back(static_cast<uint64_t>(plan.numel));
  for (int64_t d : plan.dims) p.push_back(static_cast<uint64_t>(d));
  for (size_t k = 0; k < plan.leaves.size(); ++k) {
    p.push_back(leaves[k]);
    if (plan.leafKind[k] == 'S')
      for (int64_t s : plan.leafStrides[k]) p.push_back(static_cast<uint64_t>(s));
  }
  for (uint64_t bits : plan.scalarBits) p.push_back(bits);
  return p;
}

}  // namespace gizml::gpuops
