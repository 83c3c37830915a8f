#pragma once
// What the diffusion transformers share on tensor ops: a linear with an optional bias, taken from
// a WeightFile by name with its sizes checked, or moved to a GPU (the RMSNorm is dit_ops.h's).
#include <gizml/netops.h>
#include <gizml/tensor.h>

#include <optional>
#include <string>
#include <vector>

#include "dit_ops.h"
#include "weight_file.h"

namespace gizml::diffusion {

struct Linear {
  T::Tensor w;                 // [out, in]
  std::optional<T::Tensor> b;  // [out]
};

// x Wᵀ (+ b): x [rows, in] to [rows, out].
inline T::Tensor linear(const Linear& l, const T::Tensor& x) {
  if (l.b) return netops::affine(x, l.w, *l.b);
  return T::matmul(x, l.w.transpose(0, 1));
}

// The linear on a GPU.
inline Linear moved(const Linear& l, const gizhw::gpu::Gpu& g) {
  return {l.w.on(g), l.b ? std::optional<T::Tensor>(l.b->on(g)) : std::nullopt};
}

// Blocks on a GPU, each by its own moved(block, g).
template <class Block>
std::vector<Block> movedAll(const std::vector<Block>& blocks, const gizhw::gpu::Gpu& g) {
  std::vector<Block> m;
  for (const Block& b : blocks) m.push_back(moved(b, g));
  return m;
}

inline Linear takeLinear(WeightFile& f, const std::string& name, int64_t in, int64_t out, bool bias) {
  Linear l{f.take(name + ".weight", {out, in}), std::nullopt};
  if (bias) l.b = f.take(name + ".bias", {out});
  return l;
}

// The first dimension of a 2-D weight (its output width).
inline int64_t outputs(const WeightFile& f, const std::string& name) {
  const T::Shape s = f.shapeOf(name);
  if (s.size() != 2 || s[0] < 1 || s[1] < 1) f.fail(name, "has shape " + T::shapeText(s) + ", expected [out, in]");
  return s[0];
}

}  // namespace gizml::diffusion
