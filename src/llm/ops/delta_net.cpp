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
                 const Tensor& a, DeltaNetState& state, const Tensor& o) {
  const int64_t channels = shape.channels(), rows = qkv.numel() / channels;
  require(qkv.numel() == rows * channels && b.numel() == rows * shape.valueHeads && a.numel() == b.numel() && o.numel() == rows * shape.valueHeads * shape.valueDim, [&] {
      return "deltaNetMix: qkv " + tensor::shapeText(qkv.shape()) + ", b " + tensor::shapeText(b.shape()) + ", a "
             + tensor::shapeText(a.shape()) + " and o " + tensor::shapeText(o.shape())
             + " are not the rows of one layer";
  });
  require(state.conv.numel() == (shape.kernel - 1) * channels && state.memory.numel() == shape.valueHeads * shape.keyDim * shape.valueDim, [&] {
      return "deltaNetMix: the state is not this layer's";
  });
  const char* op = "deltaNetMix";
  if (onGpu(op, {&qkv, &b, &a, &w.taps, &w.decayRate, &w.dtBias, &state.conv, &state.memory, &o})) {
    for (const Tensor* t : std::initializer_list<const Tensor*>{&qkv, &b, &a, &w.taps, &w.decayRate, &w.dtBias,
                                                                 &state.memory, &o})
      checkF32Rows(op, *t);
    return gpu::deltaNetMix({shape.keyHeads, shape.valueHeads, shape.keyDim, shape.valueDim, shape.kernel, rows, qkv, b,
                             a, w.taps, w.decayRate, w.dtBias, state.conv, state.memory, o});
  }
  cpu::delta::mix({shape.keyHeads, shape.valueHeads, shape.keyDim, shape.valueDim}, shape.kernel, hostF32(op, qkv),
                  hostF32(op, b), hostF32(op, a), rows, hostF32(op, w.taps), hostF32(op, w.decayRate),
                  hostF32(op, w.dtBias), hostF32(op, state.conv), hostF32(op, state.memory), hostF32(op, o));
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
