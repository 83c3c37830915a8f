// Evaluating a Lazy expression in one pass: the output is cut into blocks of kBlock elements,
// and for each block every step computes its values into a small per-thread buffer (so all
// operands of a block stay in L1) before the root's block is stored. Runs of f32 operations
// where each value feeds only the next one are fused into one chain step that keeps the values
// in registers (cpu/elementwise_chain.h). No intermediate tensor exists; the only allocation of
// the size of the data is the result. A deferred product (Lazy::Product, lazyConv) is computed
// a tile at a time and each tile's rows run the steps as blocks while the tile is in cache; where
// that cannot be (see tiledProduct), the product is computed first.
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "core/thread_pool.h"
#include "cpu/convert.h"
#include "cpu/elementwise.h"
#include "cpu/elementwise_chain.h"
#include "tensor/gpu/tensor_ops.h"
#include "tensor/lazy_node.h"
#include "tensor/shape_util.h"

namespace gizml::tensor {
namespace {

using Kind = Lazy::Node::Kind;
constexpr int64_t kBlock = 1024;  // elements per block: 4 KiB per f32 buffer
// Results from this size up are written with streaming stores: beyond the last-level cache.
constexpr int64_t kStreamBytes = int64_t{32} << 20;

// The working representation of a step's values (cpu/convert.h).
enum class Rep : uint8_t { F32, I64, F64 };

Rep repOf(DType t) { return cpu::worksInF64(t) ? Rep::F64 : cpu::worksInF32(t) ? Rep::F32 : Rep::I64; }

struct Step {
  const Lazy::Node* node = nullptr;  // a chain: its last operation
  Rep rep = Rep::F32;  // working representation: f32 (F32/F16/BF16, bools), f64 (F64) or i64
  std::vector<int> inputs;
  std::vector<cpu::ChainOp> links;  // a chain: inputs[0] is its start, the others its operands
  const char* base = nullptr;  // Leaf: first element (I4: the storage's first byte)
  int64_t first = 0;           // Leaf, I4: the element base starts at
  Shape strides;               // Leaf: strides over the coalesced output axes
};

struct Program {
  std::vector<Step> steps;  // in dependency order; the last is the root
  std::vector<int> leaves;
  std::vector<int> slot;    // the scratch buffer of each step (reused once its value is dead)
  int slots = 0;
};

// Whether inputs[k] is the first mention of that input (a step may read a value twice).
bool firstMention(const std::vector<int>& inputs, size_t k) {
  const auto end = inputs.begin() + static_cast<std::ptrdiff_t>(k);
  return std::find(inputs.begin(), end, inputs[k]) == end;
}

// Gives each step a buffer, reusing those of values no later step reads, so a long chain needs
// only a few buffers and they stay in L1. Scalars keep theirs: they are filled once.
void assignSlots(Program& p) {
  const int count = static_cast<int>(p.steps.size());
  std::vector<int> lastUse(count, count);
  for (int i = 0; i < count; ++i)
    for (int input : p.steps[i].inputs) lastUse[input] = i;
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
    const std::vector<int>& inputs = p.steps[i].inputs;
    for (size_t k = 0; k < inputs.size(); ++k) {
      const int input = inputs[k];
      if (firstMention(inputs, k) && lastUse[input] == i && p.steps[input].node->kind != Kind::Scalar)
        freeSlots.push_back(p.slot[input]);
    }
  }
}

int addSteps(const Lazy::Node* node, Program& program, std::unordered_map<const Lazy::Node*, int>& index) {
  if (auto it = index.find(node); it != index.end()) return it->second;
  Step step;
  step.node = node;
  step.rep = repOf(node->dtype);
  for (const auto& input : node->inputs) step.inputs.push_back(addSteps(input.get(), program, index));
  const int id = static_cast<int>(program.steps.size());
  if (node->kind == Kind::Leaf) program.leaves.push_back(id);
  program.steps.push_back(std::move(step));
  index[node] = id;
  return id;
}

// The step of the deferred product, or -1.
int productStep(const Program& program) {
  for (size_t i = 0; i < program.steps.size(); ++i)
    if (program.steps[i].node->kind == Kind::Product) return static_cast<int>(i);
  return -1;
}

// The coalesced axes of the output (shape_util.h), with each leaf's strides over them. A product
// (of the output's shape) counts as a leaf whose rows are one element longer than they are, so
// that its last axis, the tiles' columns, is never merged with the others.
Shape coalesce(const Shape& shape, Program& program) {
  std::vector<Shape> strides;
  for (int leaf : program.leaves) {
    const Tensor& t = program.steps[leaf].node->tensor;
    strides.push_back(broadcastStrides(t.shape(), t.strides(), shape));
  }
  const int product = productStep(program);
  if (product >= 0) {
    Shape padded = shape;
    padded.back() += 1;
    strides.push_back(contiguousStrides(padded));
  }
  Coalesced merged = coalesceAxes(shape, strides);
  for (size_t l = 0; l < program.leaves.size(); ++l) {
    Step& s = program.steps[program.leaves[l]];
    const Tensor& t = s.node->tensor;
    // I4 elements are addressed by their index (two a byte), the others by their address.
    s.base = static_cast<const char*>(t.dtype() == DType::I4 ? t.storage()->data() : t.rawData());
    s.first = t.dtype() == DType::I4 ? t.offset() : 0;
    s.strides = std::move(merged.strides[l]);
  }
  if (product >= 0) program.steps[product].strides = std::move(merged.strides.back());
  return merged.dims;
}

// The steps that the root reads, directly or not, in the same order (with the leaves listed).
Program dropUnread(Program fused) {
  const int fusedCount = static_cast<int>(fused.steps.size());
  std::vector<bool> needed(fusedCount, false);
  needed[fusedCount - 1] = true;
  for (int i = fusedCount - 1; i >= 0; --i)
    if (needed[i])
      for (int input : fused.steps[i].inputs) needed[input] = true;
  Program kept;
  std::vector<int> keptIndex(fusedCount, -1);
  for (int i = 0; i < fusedCount; ++i) {
    if (!needed[i]) continue;
    Step step = std::move(fused.steps[i]);
    for (int& input : step.inputs) input = keptIndex[input];
    keptIndex[i] = static_cast<int>(kept.steps.size());
    if (step.node->kind == Kind::Leaf) kept.leaves.push_back(keptIndex[i]);
    kept.steps.push_back(std::move(step));
  }
  return kept;
}

bool chainable(const Step& s) {
  const Lazy::Node& n = *s.node;
  if (n.dtype != DType::F32) return false;  // F16/BF16 round after each operation, Bool is 0/1
  if (n.kind == Kind::Unary) return cpu::chainsUnary(n.unaryOp);
  if (n.kind == Kind::Binary) return cpu::chainsBinary(n.binaryOp);
  return false;
}

// How a chainable step joins a chain: the input it continues (`from`) and its link.
struct Link {
  int from = -1;
  int operand = -1;  // the other input, for the Operand forms
  cpu::ChainOp op;
};

// Fuses chains: a chainable step whose input is read by nothing else continues that input's
// chain (up to kMaxChainLinks links), with its other operand (a scalar constant or any computed
// value) as a link operand. The chain runs where its last step was (all its operands are
// computed by then) and its inner values get no buffer. Steps no one reads any more (scalars
// now inside links) are dropped.
Program fuseChains(const Program& p) {
  const int count = static_cast<int>(p.steps.size());
  std::vector<int> readers(count, 0);
  for (const Step& s : p.steps)
    for (size_t k = 0; k < s.inputs.size(); ++k)
      if (firstMention(s.inputs, k)) ++readers[s.inputs[k]];
  std::vector<bool> isChain(count, false), continued(count, false);
  std::vector<int64_t> length(count, 1);  // links in the chain up to each step
  auto continues = [&](int input) { return isChain[input] && readers[input] == 1; };
  std::vector<Link> links(count);
  for (int i = 0; i < count; ++i) {
    const Step& s = p.steps[i];
    if (!(isChain[i] = chainable(s))) continue;
    Link& link = links[i];
    if (s.node->kind == Kind::Unary) {
      link.from = s.inputs[0];
      link.op = {cpu::ChainOp::Form::Unary, static_cast<uint8_t>(s.node->unaryOp), 0, 0.0f};
    } else {
      const int a = s.inputs[0], b = s.inputs[1];
      auto isScalar = [&](int k) { return p.steps[k].node->kind == Kind::Scalar; };
      // Continue a's chain if possible, else b's; else start from a tensor rather than a constant.
      const bool second = a != b && !continues(a) && (continues(b) || (isScalar(a) && !isScalar(b)));
      link.from = second ? b : a;
      const int other = second ? a : b;
      using Form = cpu::ChainOp::Form;
      Form form = second ? Form::OperandFirst : Form::Operand;
      float constant = 0.0f;
      if (a == b) {
        form = Form::Self;
      } else if (isScalar(other)) {
        form = second ? Form::ScalarFirst : Form::Scalar;
        constant = doubleToWorkingF32(p.steps[other].node->value, DType::F32);
      } else {
        link.operand = other;
      }
      link.op = {form, static_cast<uint8_t>(s.node->binaryOp), 0, constant};
    }
    if (continues(link.from) && length[link.from] < cpu::kMaxChainLinks) {
      continued[link.from] = true;
      length[i] = length[link.from] + 1;
    }
  }

  Program fused;
  std::vector<int> newIndex(count, -1);
  for (int i = 0; i < count; ++i) {
    if (continued[i]) continue;  // runs inside the chain of its reader
    Step step = p.steps[i];
    if (isChain[i]) {
      std::vector<int> members;  // the chain's steps, last first
      for (int j = i;; j = links[j].from) {
        members.push_back(j);
        if (!continued[links[j].from]) break;
      }
      step.inputs = {newIndex[links[members.back()].from]};
      for (auto m = members.rbegin(); m != members.rend(); ++m) {
        cpu::ChainOp op = links[*m].op;
        if (links[*m].operand >= 0) {
          const int input = newIndex[links[*m].operand];
          auto at = std::find(step.inputs.begin() + 1, step.inputs.end(), input);
          if (at == step.inputs.end()) at = step.inputs.insert(at, input);
          op.operand = static_cast<uint32_t>(at - step.inputs.begin() - 1);
        }
        step.links.push_back(op);
      }
    } else {
      for (int& input : step.inputs) input = newIndex[input];
    }
    newIndex[i] = static_cast<int>(fused.steps.size());
    fused.steps.push_back(std::move(step));
  }
  return dropUnread(std::move(fused));
}


// One thread's state while it runs the steps over its blocks.
struct Worker {
  std::vector<void*> buffers;          // where each step writes its block
  std::vector<const void*> views;      // where each step's block is read: its buffer, or the
                                       // operand itself for a contiguous f32 leaf (no copy)
  std::vector<const float*> operands;  // a chain's operand arrays for the block
  bool stream = false;                 // the root writes the output with streaming stores
};

// Computes step s of one block (n values at position inner0 of row `outer`) into its buffer.
void runStep(const Program& program, const Step& s, Worker& w, int64_t n, const Shape& dims, int64_t outer,
             int64_t inner0) {
  const Lazy::Node& node = *s.node;
  const size_t id = static_cast<size_t>(&s - program.steps.data());
  std::vector<const void*>& views = w.views;
  void* out = w.buffers[id];
  auto in = [&](int k) { return views[s.inputs[k]]; };
  auto inF = [&](int k) { return static_cast<const float*>(in(k)); };
  auto inI = [&](int k) { return static_cast<const int64_t*>(in(k)); };
  auto inD = [&](int k) { return static_cast<const double*>(in(k)); };
  float* outF = static_cast<float*>(out);
  int64_t* outI = static_cast<int64_t*>(out);
  double* outD = static_cast<double*>(out);
  const Rep rep = s.rep;
  if (!s.links.empty()) {
    for (size_t k = 1; k < s.inputs.size(); ++k) w.operands[k - 1] = inF(static_cast<int>(k));
    const bool stream = w.stream && id + 1 == program.steps.size();
    cpu::chainF32(s.links.data(), static_cast<int64_t>(s.links.size()), inF(0), w.operands.data(), outF, n, stream);
    return;
  }
  switch (node.kind) {
    case Kind::Leaf: {
      const int64_t rank = static_cast<int64_t>(dims.size());
      int64_t offset = inner0 * s.strides[rank - 1];
      for (int64_t axis = rank - 2; axis >= 0; --axis) {
        offset += (outer % dims[axis]) * s.strides[axis];
        outer /= dims[axis];
      }
      const DType t = node.tensor.dtype();
      if (t == DType::I4) return cpu::loadI4(s.base, s.first + offset, s.strides[rank - 1], n, outI);
      const char* base = s.base + offset * static_cast<int64_t>(dtypeSize(t));
      if ((t == DType::F32 || t == DType::F64) && s.strides[rank - 1] == 1) views[id] = base;
      else if (rep == Rep::F32) cpu::loadF32(t, base, s.strides[rank - 1], n, outF);
      else if (rep == Rep::F64) cpu::loadF64(base, s.strides[rank - 1], n, outD);
      else cpu::loadI64(t, base, s.strides[rank - 1], n, outI);
      return;
    }
    case Kind::Scalar:
      return;  // filled once per task
    case Kind::Product:
      return;  // the view is the product tile's row (runTiles)
    case Kind::Unary:
      if (rep == Rep::F32) {
        cpu::unaryF32(node.unaryOp, inF(0), outF, n);
        cpu::roundF32To(node.dtype, outF, n);
      } else if (rep == Rep::F64) {
        cpu::unaryF64(node.unaryOp, inD(0), outD, n);
      } else {
        cpu::unaryI64(node.unaryOp, inI(0), outI, n);
        cpu::wrapI64To(node.dtype, outI, n);
      }
      return;
    case Kind::Binary: {
      const Rep inputs = program.steps[s.inputs[0]].rep;
      if (isComparison(node.binaryOp) && inputs == Rep::I64) {
        cpu::compareI64(node.binaryOp, inI(0), inI(1), outF, n);
      } else if (isComparison(node.binaryOp) && inputs == Rep::F64) {
        cpu::compareF64(node.binaryOp, inD(0), inD(1), outF, n);
      } else if (rep == Rep::F64) {
        cpu::binaryF64(node.binaryOp, inD(0), inD(1), outD, n);
      } else if (rep == Rep::F32) {
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
      if (rep == Rep::F32) cpu::whereF32(inF(0), inF(1), inF(2), outF, n);
      else if (rep == Rep::F64) cpu::whereF64(inF(0), inD(1), inD(2), outD, n);
      else cpu::whereI64(inF(0), inI(1), inI(2), outI, n);
      return;
    case Kind::Cast: {
      const Rep from = program.steps[s.inputs[0]].rep;
      if (from == Rep::F64 || rep == Rep::F64) {
        if (from == Rep::F64 && rep == Rep::F64) std::copy(inD(0), inD(0) + n, outD);
        else if (from == Rep::F64 && rep == Rep::F32) cpu::castF64ToF32(node.dtype, inD(0), n, outF);
        else if (from == Rep::F64) cpu::castF64ToI64(node.dtype, inD(0), n, outI);
        else if (from == Rep::F32) cpu::castF32ToF64(inF(0), n, outD);
        else cpu::castI64ToF64(inI(0), n, outD);
      } else if (from == Rep::F32 && rep == Rep::F32) {
        std::copy(inF(0), inF(0) + n, outF);
        cpu::roundF32To(node.dtype, outF, n);
      } else if (from == Rep::F32) {
        cpu::castF32ToI64(node.dtype, inF(0), n, outI);
      } else if (rep == Rep::F32) {
        cpu::castI64ToF32(node.dtype, inI(0), n, outF);
      } else {
        std::copy(inI(0), inI(0) + n, outI);
        cpu::castI64ToI64(node.dtype, outI, n);
      }
      return;
    }
  }
}

void fillScalar(const Step& s, void* buffer) {
  if (s.rep == Rep::F64) {
    std::fill_n(static_cast<double*>(buffer), kBlock, s.node->value);
  } else if (s.rep == Rep::F32) {
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

// F64 runs on the CPU alone, and GPUs hold I4 only for copies and int8RowsInto's codes: an
// expression on a GPU with such a value is an Error. (Each node once: a value read twice is one
// node.)
void rejectCpuOnlyOnGpu(const Lazy::Node& root) {
  forEachNode(root, [](const Lazy::Node& node) {
    const std::string what = std::string("elementwise (") +
                             (node.kind == Kind::Cast     ? "cast"
                              : node.kind == Kind::Unary  ? opName(node.unaryOp)
                              : node.kind == Kind::Binary ? opName(node.binaryOp)
                                                          : "value") +
                             ") on the GPU: ";
    check(node.dtype != DType::F64, what + "dtype f64 runs only on the CPU");
    check(node.dtype != DType::I4, what + "dtype i4 is held on a GPU only for copies and int8RowsInto's codes "
                                          "(copy it to the host with host() first)");
  });
}

// The expression's deferred product if it is the only one and of the output's shape (a product
// broadcast to a larger shape, or two products, are computed first).
const Lazy::Node* onlyProduct(const Lazy::Node& root) {
  const Lazy::Node* found = nullptr;
  int products = 0;
  forEachNode(root, [&](const Lazy::Node& node) {
    if (node.kind == Kind::Product) found = &node, ++products;
  });
  return products == 1 && found->shape == root.shape ? found : nullptr;
}

// The product if it can run in tiles on the host: also at least two axes.
const Lazy::Node* tiledProduct(const Lazy::Node& root) {
  const Lazy::Node* found = onlyProduct(root);
  return found && found->product->tiles() && found->shape.size() >= 2 ? found : nullptr;
}

// On a GPU: the expression in its product's store where the product can do that, else the
// product computed first (its own kernels) and read as a leaf by the generated kernel.
void evalOnGpu(const std::shared_ptr<const Lazy::Node>& root, const Tensor& out) {
  rejectCpuOnlyOnGpu(*root);
  if (out.numel() == 0) return;
  if (const Lazy::Node* product = onlyProduct(*root); product && product->product->storeTail(*root, out)) return;
  gpuops::evalLazy(*computeProducts(root), out);
}

// How the blocks of one evaluation are computed and stored.
struct Evaluation {
  const Lazy::Node& root;
  Program program;
  Shape dims;
  char* outBase;
  bool packed = false;  // I4: two elements a byte (out starts at a byte)
  int64_t outSize;      // bytes an element (0 when packed)
  size_t operands = 0;  // the most inputs of a step
  bool direct = false;  // the root's values are computed straight into the output
  bool stream = false;  // ... with streaming stores

  Evaluation(const Lazy::Node& r, const Tensor& out) : root(r) {
    Program naive;
    std::unordered_map<const Lazy::Node*, int> index;
    addSteps(&root, naive, index);
    program = fuseChains(naive);
    dims = coalesce(root.shape, program);
    assignSlots(program);
    outBase = static_cast<char*>(out.rawData());
    packed = root.dtype == DType::I4;
    outSize = packed ? 0 : static_cast<int64_t>(dtypeSize(root.dtype));
    for (const Step& s : program.steps) operands = std::max(operands, s.inputs.size());
    // An f32 result is computed straight into the output, bypassing the caches when it is larger
    // than they are (it would only evict the inputs, and the stores skip reading the lines first).
    // An f64 result likewise (without streaming stores: only chains, which are f32, stream).
    direct = (root.dtype == DType::F32 || root.dtype == DType::F64) && root.kind != Kind::Scalar;
    stream = direct && root.dtype == DType::F32 && out.numel() * outSize >= kStreamBytes;
  }

  // A thread's worker; `scratch` holds its buffers.
  Worker worker(std::vector<int64_t>& scratch) const {
    Worker w;
    // Buffers of 8 bytes per element (either representation fits).
    scratch.assign(static_cast<size_t>(program.slots) * kBlock, 0);
    w.buffers.resize(program.steps.size());
    w.views.resize(program.steps.size());
    w.operands.resize(operands);
    w.stream = stream;
    for (size_t i = 0; i < program.steps.size(); ++i) {
      w.views[i] = w.buffers[i] = scratch.data() + program.slot[i] * kBlock;
      if (program.steps[i].node->kind == Kind::Scalar) fillScalar(program.steps[i], w.buffers[i]);
    }
    return w;
  }

  // The n <= kBlock values at inner0 of coalesced row `outer` into the output; `product`, when
  // the expression has one, is where that row's values of the product are.
  void block(Worker& w, int64_t n, int64_t outer, int64_t inner0, int product, const float* productRow) const {
    const int64_t inner = dims.back();
    char* dst = packed ? nullptr : outBase + (outer * inner + inner0) * outSize;
    if (direct) w.views.back() = w.buffers.back() = dst;
    // After the line above: an expression that is the product alone stores the product's row.
    if (product >= 0) w.views[static_cast<size_t>(product)] = productRow;
    for (const Step& s : program.steps) runStep(program, s, w, n, dims, outer, inner0);
    if (packed) return cpu::storeI4(outBase, outer * inner + inner0, static_cast<const int64_t*>(w.views.back()), n);
    if (w.views.back() == dst) return;
    const Rep rep = program.steps.back().rep;
    if (rep == Rep::F32) cpu::storeF32(root.dtype, static_cast<const float*>(w.views.back()), n, dst);
    else if (rep == Rep::F64) std::copy_n(static_cast<const double*>(w.views.back()), n, reinterpret_cast<double*>(dst));
    else cpu::storeI64(root.dtype, static_cast<const int64_t*>(w.views.back()), n, dst);
  }

  void runBlocks() const {
    const int64_t inner = dims.back();
    const int64_t blocksPerRow = (inner + kBlock - 1) / kBlock;
    const int64_t blocks = elementCount(root.shape) / inner * blocksPerRow;
    // Blocks start at even elements when rows are even (kBlock is); several I4 rows of odd length
    // would have two threads write one byte, so those run in one task.
    const bool shared = packed && inner % 2 != 0 && blocks > blocksPerRow;
    const int64_t grain = shared ? blocks : std::max<int64_t>(1, 32768 / kBlock);
    core::parallelFor(blocks, grain, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> scratch;
      Worker w = worker(scratch);
      for (int64_t b = begin; b < end; ++b) {
        const int64_t inner0 = (b % blocksPerRow) * kBlock;
        block(w, std::min(kBlock, inner - inner0), b / blocksPerRow, inner0, -1, nullptr);
      }
      if (stream) cpu::streamFence();  // before the pool reports this range done
    });
  }

  // The product's tiles, each tileRows() rows by up to tileColumns() (at most kBlock) columns:
  // each tile is computed into a per-thread buffer, then every row of it runs the steps as one
  // block (the product's coalesced rows are its own: coalesce keeps its last axis apart).
  void runTiles(const Lazy::Product& product) const {
    const int step = productStep(program);
    const int64_t cols = dims.back();
    const int64_t tileRows = product.tileRows();
    const int64_t tileCols = std::clamp<int64_t>(product.tileColumns(), 1, kBlock);
    const int64_t bands = (cols + tileCols - 1) / tileCols;
    const int64_t groups = elementCount(root.shape) / cols / tileRows;
    core::parallelFor(groups * bands, 1, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> scratch;
      Worker w = worker(scratch);
      std::vector<float> tile(static_cast<size_t>(tileRows * tileCols));
      for (int64_t t = begin; t < end; ++t) {
        const int64_t group = t / bands, j0 = t % bands * tileCols, n = std::min(tileCols, cols - j0);
        product.computeTile(group, j0, j0 + n, tile.data());
        for (int64_t r = 0; r < tileRows; ++r) block(w, n, group * tileRows + r, j0, step, tile.data() + r * n);
      }
      if (stream) cpu::streamFence();
    });
  }
};

}  // namespace

Tensor Lazy::eval() const {
  if (const auto gpu = gpuops::deviceOf(*node_, nullptr)) {  // leaves on a GPU: one generated kernel there
    Tensor out = gpuops::empty(node_->shape, node_->dtype, gpu);
    evalOnGpu(node_, out);
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
  if (gpuops::deviceOf(root, &out)) return evalOnGpu(node_, out);
  if (out.numel() == 0) return;
  // A contiguous host tensor read as it is (clone, assign of like elements): one copy, where the
  // program would widen each element to 64 or 32 bits and back (a KV page's 8-bit codes moved
  // between pools: 9 % of a chat's turn). memmove: where out overlaps it, its values before.
  const Tensor& leaf = root.tensor;
  if (root.kind == Node::Kind::Leaf && root.dtype != DType::I4 && !leaf.onGpu() && leaf.isContiguous()) {
    std::memmove(out.rawData(), leaf.rawData(), static_cast<size_t>(out.numel()) * dtypeSize(root.dtype));
    return;
  }

  const Node* product = nullptr;
  if (readsProduct(root) && !(product = tiledProduct(root)))
    return Lazy(computeProducts(node_)).evalInto(out);
  const Evaluation evaluation(root, out);
  if (!product) return evaluation.runBlocks();
  // The tiles' columns must be the output's last axis (not so when it has one element and the
  // coalesced axes dropped it), and an I4 output's tiles of odd rows would share bytes across
  // threads: otherwise the product is computed first.
  const Step& tiles = evaluation.program.steps[static_cast<size_t>(productStep(evaluation.program))];
  if (evaluation.packed || evaluation.dims.back() != product->shape.back() || tiles.strides.back() != 1)
    return Lazy(computeProducts(node_)).evalInto(out);
  evaluation.runTiles(*product->product);
}

}  // namespace gizml::tensor
