#include "llm/ops/rows.h"

#include <gizml/error.h>

#include "cpu/layer_rows.h"
#include "llm/ops/gpu/model_ops_gpu.h"
#include "llm/ops/host.h"
#include "tensor/gpu/tensor_ops.h"

namespace gizml::llm::ops {
namespace {

void sameSize(const char* op, const Tensor& a, const Tensor& b) {
  require(a.numel() == b.numel(), [&] {
      return std::string(op) + ": operands of " + tensor::shapeText(a.shape()) + " and "
             + tensor::shapeText(b.shape()) + " differ in size";
  });
}

// A strided copy on a GPU: an expression of the tensor layer, evaluated in place.
void evalInPlace(const char* op, const tensor::Lazy& e, const Tensor& x) {
  checkF32Rows(op, x);
  e.evalInto(x);
}

// The layer's elementwise steps on a GPU: one fixed kernel (gpu::elementwise), no expression to
// build and hash each call.
void inPlace(const char* op, gpu::Elementwise kind, const Tensor& x, const Tensor* y = nullptr, float s = 0) {
  checkF32Rows(op, x);
  if (y) checkF32Rows(op, *y);
  gpu::elementwise(kind, x, y, s);
}

}  // namespace

namespace {

// rmsNorm, with `add`: x += add first.
void normRows(const char* op, const Tensor& x, const Tensor* add, const Tensor& w, float eps, const Tensor& out) {
  const int64_t dim = w.numel();
  require(dim > 0 && x.numel() % dim == 0, [&] {
      return std::string(op) + ": rows of " + std::to_string(dim) + " do not divide " + tensor::shapeText(x.shape());
  });
  sameSize(op, x, out);
  if (add) sameSize(op, x, *add);
  if (onGpu(op, {&x, &w, &out, add ? add : &w})) {
    for (const Tensor* t : {&x, &w, &out, add ? add : &w}) checkF32Rows(op, *t);
    return gpu::rmsNorm(x, w, eps, out, x.numel() / dim, dim, add);
  }
  if (add) cpu::addRows(hostF32(op, x), hostF32(op, *add), x.numel());
  cpu::rmsNormRows(hostF32(op, x), x.numel() / dim, dim, hostF32(op, w), eps, hostF32(op, out));
}

}  // namespace

void rmsNorm(const Tensor& x, const Tensor& w, float eps, const Tensor& out) { normRows("rmsNorm", x, nullptr, w, eps, out); }

void addThenRmsNorm(const Tensor& x, const Tensor& y, const Tensor& w, float eps, const Tensor& out) {
  normRows("addThenRmsNorm", x, &y, w, eps, out);
}

void rope(const Tensor& q, int64_t qHeads, const Tensor& k, int64_t kHeads, int64_t headDim, const Tensor& invFreq,
          int64_t start, const Tensor* positions) {
  const int64_t rows = q.numel() / (qHeads * headDim);
  require(q.numel() == rows * qHeads * headDim && k.numel() == rows * kHeads * headDim && 2 * invFreq.numel() <= headDim, [&] {
      return "rope: q " + tensor::shapeText(q.shape()) + " and k " + tensor::shapeText(k.shape())
             + " are not rows of " + std::to_string(qHeads) + " and " + std::to_string(kHeads) + " heads of "
             + std::to_string(headDim);
  });
  const bool perRow = positions && positions->shape() == tensor::Shape{rows};
  require(!positions || (positions->dtype() == DType::I32 && positions->isContiguous() &&
                         (perRow || positions->shape() == tensor::Shape{rows, invFreq.numel()})), [&] {
    return "rope: positions " + tensor::shapeText(positions->shape()) + " " + dtypeName(positions->dtype()) +
           ", expected I32 [" + std::to_string(rows) + ", " + std::to_string(invFreq.numel()) + "] or [" +
           std::to_string(rows) + "]";
  });
  if (onGpu("rope", {&q, &k, &invFreq})) {
    for (const Tensor* t : {&q, &k, &invFreq}) checkF32Rows("rope", *t);
    // Positions in host memory are copied to q's GPU once for every layer of the pass.
    require(!positions || !positions->onGpu() || positions->storage()->gpu() == q.storage()->gpu(),
            [&] { return "rope: positions on " + positions->device() + ", rows on " + q.device(); });
    return gpu::rope(q, k, rows, qHeads, kHeads, headDim, invFreq, start, positions);
  }
  require(!positions || !positions->onGpu(), [] { return std::string("rope: positions on a GPU, rows on the host"); });
  // The CPU's rows read a position for each pair.
  const Tensor pairs = perRow ? positions->reshape({rows, 1}).expand({rows, invFreq.numel()}).contiguous() : Tensor();
  const Tensor* at = perRow ? &pairs : positions;
  cpu::ropeRows(hostF32("rope", q), qHeads, hostF32("rope", k), kHeads, rows, headDim, hostF32("rope", invFreq),
                invFreq.numel(), start, at ? at->data<int32_t>() : nullptr);
}

void addInPlace(const Tensor& x, const Tensor& y) {
  sameSize("addInPlace", x, y);
  if (onGpu("addInPlace", {&x, &y})) return inPlace("addInPlace", gpu::Elementwise::Add, x, &y);
  cpu::addRows(hostF32("addInPlace", x), hostF32("addInPlace", y), x.numel());
}

void gatedActivation(const Tensor& gate, const Tensor& up, Activation act) {
  sameSize("gatedActivation", gate, up);
  if (onGpu("gatedActivation", {&gate, &up}))
    return inPlace("gatedActivation", act == Activation::Silu ? gpu::Elementwise::SiluMul : gpu::Elementwise::GeluMul,
                   gate, &up);
  cpu::gatedActivation(hostF32("gatedActivation", gate), hostF32("gatedActivation", up), gate.numel(),
                       act == Activation::Silu ? cpu::GateActivation::Silu : cpu::GateActivation::GeluTanh);
}

void sigmoidGate(const Tensor& x, const Tensor& gate) {
  sameSize("sigmoidGate", x, gate);
  if (onGpu("sigmoidGate", {&x, &gate})) return inPlace("sigmoidGate", gpu::Elementwise::SigmoidGate, x, &gate);
  cpu::sigmoidGate(hostF32("sigmoidGate", x), hostF32("sigmoidGate", gate), x.numel());
}

void softcap(const Tensor& x, float cap) {
  if (onGpu("softcap", {&x})) return inPlace("softcap", gpu::Elementwise::Softcap, x, nullptr, cap);
  cpu::softcap(hostF32("softcap", x), x.numel(), cap);
}

void scaleInPlace(const Tensor& x, float s) {
  if (onGpu("scaleInPlace", {&x})) return inPlace("scaleInPlace", gpu::Elementwise::Scale, x, nullptr, s);
  cpu::scaleRows(hostF32("scaleInPlace", x), x.numel(), s);
}

void splitRuns(const Tensor& both, int64_t width, const Tensor& first, const Tensor& second) {
  require(width > 0 && both.numel() % (2 * width) == 0, [&] {
      return "splitRuns: " + tensor::shapeText(both.shape()) + " is not runs of 2 x " + std::to_string(width);
  });
  require(first.numel() * 2 == both.numel() && second.numel() == first.numel(), [&] {
      return "splitRuns: the halves' sizes differ";
  });
  if (onGpu("splitRuns", {&both, &first, &second})) {
    const int64_t runs = both.numel() / (2 * width);
    const Tensor pairs = both.reshape({runs, 2, width});
    evalInPlace("splitRuns", tensor::lazy(pairs.slice(1, 0, 1)), first.reshape({runs, 1, width}));
    return evalInPlace("splitRuns", tensor::lazy(pairs.slice(1, 1, 2)), second.reshape({runs, 1, width}));
  }
  cpu::splitRuns(hostF32("splitRuns", both), both.numel() / (2 * width), width, hostF32("splitRuns", first),
                 hostF32("splitRuns", second));
}

Tensor gatherRows(const Tensor& x, const std::vector<int64_t>& ids) {
  require(x.ndim() == 2, [&] {
      return "gatherRows: rows [rows, width] expected, not " + tensor::shapeText(x.shape());
  });
  const int64_t width = x.size(1);
  for (int64_t id : ids)
    require(id >= 0 && id < x.size(0), [&] {
        return "gatherRows: row " + std::to_string(id) + " is outside 0.." + std::to_string(x.size(0) - 1);
    });
  const auto n = static_cast<int64_t>(ids.size());
  if (onGpu("gatherRows", {&x})) {
    checkF32Rows("gatherRows", x);
    Tensor out = emptyLike({n, width}, x);
    gpuops::indexSelect(x, ids, 1, x.size(0), width, out);  // one launch for all the rows
    return out;
  }
  Tensor out = tensor::empty({n, width});
  cpu::gatherRows(hostF32("gatherRows", x), ids.data(), static_cast<int64_t>(ids.size()), width, hostF32("gatherRows", out));
  return out;
}

void zero(const Tensor& x) {
  if (onGpu("zero", {&x})) {
    checkF32Rows("zero", x);
    return gpu::zero(x);
  }
  cpu::zeroRows(hostF32("zero", x), x.numel());
}

}  // namespace gizml::llm::ops
