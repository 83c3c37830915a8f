// Evaluating a Lazy expression in one pass: the output is cut into blocks of kBlock elements,
// and for each block every node computes its values into a small per-thread buffer (so all
// operands of a block stay in L1) before the root's block is stored. No intermediate tensor
// exists; the only allocation of the size of the data is the result.
#include <algorithm>
#include <unordered_map>

#include "core/thread_pool.h"
#include "cpu/convert.h"
#include "cpu/elementwise.h"
#include "gpu/tensor_ops.h"
#include "tensor/lazy_node.h"
#include "tensor/shape_util.h"

namespace gizml::tensor {
namespace {

using Kind = Lazy::Node::Kind;
constexpr int64_t kBlock = 1024;  // elements per block: 4 KiB per f32 buffer

struct Step {
  const Lazy::Node* node = nullptr;
  bool f32 = true;     // working representation: f32 (floats, bools) or i64
  int inputs[3] = {-1, -1, -1};
  const char* base = nullptr;  // Leaf: first element
  Shape strides;               // Leaf: strides over the coalesced output axes
};

struct Program {
  std::vector<Step> steps;  // in dependency order; the last is the root
  std::vector<int> leaves;
  std::vector<int> slot;    // the scratch buffer of each step (reused once its value is dead)
  int slots = 0;
};

// Gives each step a buffer, reusing those of values no later step reads, so a long chain needs
// only a few buffers and they stay in L1. Scalars keep theirs: they are filled once.
void assignSlots(Program& p) {
  const int count = static_cast<int>(p.steps.size());
  std::vector<int> lastUse(count, count);
  for (int i = 0; i < count; ++i)
    for (int input : p.steps[i].inputs)
      if (input >= 0) lastUse[input] = i;
  lastUse[count - 1] = count;
  std::vector<int> freeSlots;
  p.slot.assign(count, -1);
  for (int i = 0; i < count; ++i) {
    if (freeSlots.empty() || p.steps[i].node->kind == Kind::Scalar) {
      p.slot[i] = p.slots++;  // scalars own theirs: they are filled before any block
    } else {
      p.slot[i] = freeSlots.back();
      freeSlots.pop_back();
    }
    for (int k = 0; k < 3; ++k) {
      const int input = p.steps[i].inputs[k];
      const bool repeated = k > 0 && (input == p.steps[i].inputs[0] || (k > 1 && input == p.steps[i].inputs[1]));
      if (input >= 0 && !repeated && lastUse[input] == i && p.steps[input].node->kind != Kind::Scalar)
        freeSlots.push_back(p.slot[input]);
    }
  }
}

int addSteps(const Lazy::Node* node, Program& program, std::unordered_map<const Lazy::Node*, int>& index) {
  if (auto it = index.find(node); it != index.end()) return it->second;
  Step step;
  step.node = node;
  step.f32 = cpu::worksInF32(node->dtype);
  for (size_t i = 0; i < node->inputs.size(); ++i)
    step.inputs[i] = addSteps(node->inputs[i].get(), program, index);
  const int id = static_cast<int>(program.steps.size());
  if (node->kind == Kind::Leaf) program.leaves.push_back(id);
  program.steps.push_back(std::move(step));
  index[node] = id;
  return id;
}

// The coalesced axes of the output (shape_util.h), with each leaf's strides over them.
Shape coalesce(const Shape& shape, Program& program) {
  std::vector<Shape> strides;
  for (int leaf : program.leaves) {
    const Tensor& t = program.steps[leaf].node->tensor;
    strides.push_back(broadcastStrides(t.shape(), t.strides(), shape));
  }
  Coalesced merged = coalesceAxes(shape, strides);
  for (size_t l = 0; l < program.leaves.size(); ++l) {
    Step& s = program.steps[program.leaves[l]];
    const Tensor& t = s.node->tensor;
    s.base = static_cast<const char*>(t.rawData());
    s.strides = std::move(merged.strides[l]);
  }
  return merged.dims;
}

// Computes step s of one block into its buffer. `views[i]` is where step i's values are read:
// its buffer, or the operand itself for a contiguous f32 leaf (no copy).
void runStep(const Program& program, const Step& s, const std::vector<void*>& buffers,
             std::vector<const void*>& views, int64_t n, const Shape& dims, int64_t outer, int64_t inner0) {
  const Lazy::Node& node = *s.node;
  const size_t id = static_cast<size_t>(&s - program.steps.data());
  void* out = buffers[id];
  auto in = [&](int k) { return views[s.inputs[k]]; };
  auto inF = [&](int k) { return static_cast<const float*>(in(k)); };
  auto inI = [&](int k) { return static_cast<const int64_t*>(in(k)); };
  float* outF = static_cast<float*>(out);
  int64_t* outI = static_cast<int64_t*>(out);
  switch (node.kind) {
    case Kind::Leaf: {
      const int64_t rank = static_cast<int64_t>(dims.size());
      int64_t offset = inner0 * s.strides[rank - 1];
      for (int64_t axis = rank - 2; axis >= 0; --axis) {
        offset += (outer % dims[axis]) * s.strides[axis];
        outer /= dims[axis];
      }
      const DType t = node.tensor.dtype();
      const char* base = s.base + offset * static_cast<int64_t>(dtypeSize(t));
      if (t == DType::F32 && s.strides[rank - 1] == 1) {
        views[id] = base;
        // Ask for the next block now so that memory streams while this block computes.
        for (int64_t line = 0; line < kBlock * 4; line += 64) __builtin_prefetch(base + kBlock * 4 + line);
      }
      else if (s.f32) cpu::loadF32(t, base, s.strides[rank - 1], n, outF);
      else cpu::loadI64(t, base, s.strides[rank - 1], n, outI);
      return;
    }
    case Kind::Scalar:
      return;  // filled once per task
    case Kind::Unary:
      if (s.f32) {
        cpu::unaryF32(node.unaryOp, inF(0), outF, n);
        cpu::roundF32To(node.dtype, outF, n);
      } else {
        cpu::unaryI64(node.unaryOp, inI(0), outI, n);
        cpu::wrapI64To(node.dtype, outI, n);
      }
      return;
    case Kind::Binary: {
      const bool inputsF32 = program.steps[s.inputs[0]].f32;
      if (isComparison(node.binaryOp) && !inputsF32) {
        cpu::compareI64(node.binaryOp, inI(0), inI(1), outF, n);
      } else if (s.f32) {
        const bool scalarFirst = program.steps[s.inputs[0]].node->kind == Kind::Scalar;
        const bool scalarSecond = program.steps[s.inputs[1]].node->kind == Kind::Scalar;
        if (scalarSecond || scalarFirst)  // the constant from a register (its buffer holds copies)
          cpu::binaryScalarF32(node.binaryOp, inF(scalarFirst ? 1 : 0), inF(scalarFirst ? 0 : 1)[0], outF, n, scalarFirst);
        else
          cpu::binaryF32(node.binaryOp, inF(0), inF(1), outF, n);
        cpu::roundF32To(node.dtype, outF, n);
      } else {
        cpu::binaryI64(node.binaryOp, inI(0), inI(1), outI, n);
        cpu::wrapI64To(node.dtype, outI, n);
      }
      return;
    }
    case Kind::Where:
      if (s.f32) cpu::whereF32(inF(0), inF(1), inF(2), outF, n);
      else cpu::whereI64(inF(0), inI(1), inI(2), outI, n);
      return;
    case Kind::Cast: {
      const bool fromF32 = program.steps[s.inputs[0]].f32;
      if (fromF32 && s.f32) {
        std::copy(inF(0), inF(0) + n, outF);
        cpu::roundF32To(node.dtype, outF, n);
      } else if (fromF32) {
        cpu::castF32ToI64(node.dtype, inF(0), n, outI);
      } else if (s.f32) {
        cpu::castI64ToF32(node.dtype, inI(0), n, outF);
      } else {
        std::copy(inI(0), inI(0) + n, outI);
        cpu::wrapI64To(node.dtype, outI, n);
      }
      return;
    }
  }
}

void fillScalar(const Step& s, void* buffer) {
  if (s.f32) {
    const float v = doubleToWorkingF32(s.node->value, s.node->dtype);
    std::fill_n(static_cast<float*>(buffer), kBlock, v);
  } else {
    int64_t v;
    const float asFloat = static_cast<float>(s.node->value);
    cpu::castF32ToI64(s.node->dtype, &asFloat, 1, &v);
    if (static_cast<double>(static_cast<int64_t>(s.node->value)) == s.node->value)
      v = static_cast<int64_t>(s.node->value);  // exact integers beyond f32's precision
    cpu::wrapI64To(s.node->dtype, &v, 1);
    std::fill_n(static_cast<int64_t*>(buffer), kBlock, v);
  }
}

}  // namespace

Tensor Lazy::eval() const {
  if (const auto gpu = gpuops::deviceOf(*node_, nullptr)) {  // leaves on a GPU: one generated kernel there
    Tensor out = gpuops::empty(node_->shape, node_->dtype, gpu);
    gpuops::evalLazy(*node_, out);
    return out;
  }
  Tensor out = empty(node_->shape, node_->dtype);
  evalInto(out);
  return out;
}

void Lazy::evalInto(const Tensor& out) const {
  const Node& root = *node_;
  check(out.shape() == root.shape && out.dtype() == root.dtype && out.isContiguous(),
        "evalInto: the output must be a contiguous " + std::string(dtypeName(root.dtype)) + " tensor of shape " +
            shapeText(root.shape) + ", not " + dtypeName(out.dtype()) + " " + shapeText(out.shape()));
  if (gpuops::deviceOf(root, &out)) return gpuops::evalLazy(root, out);
  if (out.numel() == 0) return;

  Program program;
  std::unordered_map<const Node*, int> index;
  addSteps(&root, program, index);
  const Shape dims = coalesce(root.shape, program);
  assignSlots(program);
  const int64_t inner = dims.back();
  const int64_t blocksPerRow = (inner + kBlock - 1) / kBlock;
  const int64_t blocks = out.numel() / inner * blocksPerRow;
  char* outBase = static_cast<char*>(out.rawData());
  const int64_t outSize = static_cast<int64_t>(dtypeSize(root.dtype));
  const Step& last = program.steps.back();

  core::parallelFor(blocks, std::max<int64_t>(1, 32768 / kBlock), [&](int64_t begin, int64_t end) {
    // Buffers of 8 bytes per element (either representation fits).
    std::vector<int64_t> scratch(static_cast<size_t>(program.slots) * kBlock);
    std::vector<void*> buffers(program.steps.size());
    std::vector<const void*> views(program.steps.size());
    for (size_t i = 0; i < program.steps.size(); ++i) {
      views[i] = buffers[i] = scratch.data() + program.slot[i] * kBlock;
      if (program.steps[i].node->kind == Kind::Scalar) fillScalar(program.steps[i], buffers[i]);
    }
    // An f32 result is computed straight into the output.
    const bool direct = root.dtype == DType::F32 && root.kind != Kind::Scalar;
    for (int64_t b = begin; b < end; ++b) {
      const int64_t outer = b / blocksPerRow;
      const int64_t inner0 = (b % blocksPerRow) * kBlock;
      const int64_t n = std::min(kBlock, inner - inner0);
      char* dst = outBase + (outer * inner + inner0) * outSize;
      if (direct) views.back() = buffers.back() = dst;
      for (const Step& s : program.steps) runStep(program, s, buffers, views, n, dims, outer, inner0);
      if (views.back() == dst) continue;
      if (last.f32) cpu::storeF32(root.dtype, static_cast<const float*>(views.back()), n, dst);
      else cpu::storeI64(root.dtype, static_cast<const int64_t*>(views.back()), n, dst);
    }
  });
}

}  // namespace gizml::tensor
