#include "llm/ops/delta_net.h"

#include <gizml/error.h>

#include "cpu/delta_net.h"
#include "llm/ops/gpu/model_ops_gpu.h"
#include "llm/ops/host.h"
#include "llm/ops/rows.h"

namespace gizml::llm::ops {

DeltaNetState DeltaNetState::zeros(const DeltaNetShape& s, const std::optional<gizhw::gpu::Gpu>& gpu) {
  DeltaNetState state{tensor::zeros({s.kernel - 1, s.channels()}), tensor::zeros({s.valueHeads, s.keyDim, s.valueDim})};
  if (gpu) state = {state.conv.on(*gpu), state.memory.on(*gpu)};
  return state;
}

DeltaNetState DeltaNetState::copy() const { return {conv.clone(), memory.clone()}; }

void DeltaNetState::clear() {
  zero(conv);
  zero(memory);
}

void deltaNetMix(const DeltaNetShape& shape, const DeltaNetWeights& w, const Tensor& qkv, const Tensor& b,
                 const Tensor& a, const std::vector<DeltaNetRows>& runs, const Tensor& o) {
  const int64_t channels = shape.channels(), n = qkv.numel() / channels;
  const int64_t valueWidth = shape.valueHeads * shape.valueDim;
  require(qkv.numel() == n * channels && b.numel() == n * shape.valueHeads && a.numel() == b.numel() && o.numel() == n * valueWidth, [&] {
      return "deltaNetMix: qkv " + tensor::shapeText(qkv.shape()) + ", b " + tensor::shapeText(b.shape()) + ", a "
             + tensor::shapeText(a.shape()) + " and o " + tensor::shapeText(o.shape())
             + " are not the rows of one layer";
  });
  for (size_t i = 0; i < runs.size(); ++i) {
    const DeltaNetRows& run = runs[i];
    require(run.state && run.first >= 0 && run.rows >= 0 && run.first + run.rows <= n, [&] {
        return "deltaNetMix: run " + std::to_string(i) + " is not rows of the " + std::to_string(n) + " given";
    });
    const DeltaNetState& state = *run.state;
    require(state.conv.numel() == (shape.kernel - 1) * channels && state.memory.numel() == shape.valueHeads * shape.keyDim * shape.valueDim, [&] {
        return "deltaNetMix: the state of run " + std::to_string(i) + " is not this layer's";
    });
    for (size_t j = 0; j < i; ++j)
      require(runs[j].state != run.state, [&] { return "deltaNetMix: runs " + std::to_string(j) + " and " + std::to_string(i) + " advance one state"; });
  }
  const char* op = "deltaNetMix";
  std::vector<const Tensor*> operands{&qkv, &b, &a, &w.taps, &w.decayRate, &w.dtBias, &o};
  for (const DeltaNetRows& run : runs) operands.insert(operands.end(), {&run.state->conv, &run.state->memory});
  if (onGpu(op, operands)) {
    gpu::DeltaNetRuns r{shape.keyHeads, shape.valueHeads, shape.keyDim, shape.valueDim, shape.kernel, qkv, b, a,
                        w.taps, w.decayRate, w.dtBias, o, {}};
    for (const DeltaNetRows& run : runs) {
      checkF32Rows(op, run.state->memory);
      if (run.rows > 0) r.runs.push_back({run.first, run.rows, run.state->conv, run.state->memory});
    }
    for (const Tensor* t : {&qkv, &b, &a, &w.taps, &w.decayRate, &w.dtBias, &o}) checkF32Rows(op, *t);
    return gpu::deltaNetMix(r);
  }
  const Tensor x = qkv.reshape({n, channels}), out = o.reshape({n, valueWidth});
  const Tensor bRows = b.reshape({n, shape.valueHeads}), aRows = a.reshape({n, shape.valueHeads});
  for (const DeltaNetRows& run : runs) {
    const auto rowsOf = [&](const Tensor& t) { return t.slice(0, run.first, run.first + run.rows); };
    cpu::delta::mix({shape.keyHeads, shape.valueHeads, shape.keyDim, shape.valueDim}, shape.kernel,
                    hostF32(op, rowsOf(x)), hostF32(op, rowsOf(bRows)), hostF32(op, rowsOf(aRows)), run.rows,
                    hostF32(op, w.taps), hostF32(op, w.decayRate), hostF32(op, w.dtBias),
                    hostF32(op, run.state->conv), hostF32(op, run.state->memory), hostF32(op, rowsOf(out)));
  }
}

void gatedNorm(const Tensor& o, const Tensor& z, const Tensor& w, float eps) {
  const int64_t n = w.numel();
  require(n > 0 && o.numel() % n == 0 && z.numel() == o.numel(), [&] {
      return "gatedNorm: o " + tensor::shapeText(o.shape()) + " and z " + tensor::shapeText(z.shape())
             + " are not runs of " + std::to_string(n);
  });
  if (onGpu("gatedNorm", {&o, &z, &w})) {
    for (const Tensor* t : {&o, &z, &w}) checkF32Rows("gatedNorm", *t);
    return gpu::gatedNorm(o, z, w, eps, o.numel() / n, n);
  }
  cpu::delta::gatedNorm(hostF32("gatedNorm", o), hostF32("gatedNorm", z), hostF32("gatedNorm", w), o.numel() / n, n, eps);
}

}  // namespace gizml::llm::ops
