#pragma once
// KleinDit::forward in the parts the step cache tells apart (klein_dit.cpp): the first blocks
// (FLUX.2's first double-stream block, FLUX.3's per-mode blocks), the other blocks, and the final
// layer on the image's rows. forward is out(rest()); a step the cache skips is out(first() plus
// what the other blocks added at an earlier step). The step cache's refresh runs the reference
// pictures' tokens through the blocks only at some steps; the others attend to the keys and
// values those kept (ReferenceKeys).
#include <gizml/diffusion.h>

#include <functional>
#include <vector>

#include "klein_weights.h"

namespace gizml::diffusion {

// The reference pictures' keys (after RoPE) and values in every block that attends to them,
// [heads, reference tokens, head dim] by block (FLUX.2: the double blocks, then the single ones;
// FLUX.3: the joint blocks). Record: the pass runs the references and keeps them here; Read: it
// leaves the references' tokens out and its attention reads these in their place.
struct ReferenceKeys {
  enum class Use { Record, Read } use = Use::Record;
  std::vector<T::Tensor> keys, values;
  int64_t tokens = 0;  // the references' tokens
};

class KleinPass {
 public:
  // forward's inputs, checked as forward says; embeds them and runs the first blocks. references
  // (none: the references run and nothing is kept) must outlive the pass; Read needs the keys of
  // the same pictures' tokens (an Error otherwise).
  KleinPass(const KleinDit& dit, const T::Tensor& latent, const std::vector<T::Tensor>& references,
            const T::Tensor& text, double sigma, double targetSigma, ReferenceKeys* keys = nullptr);
  KleinPass(const KleinPass&) = delete;  // rest() writes to the keys the pass was given
  KleinPass& operator=(const KleinPass&) = delete;

  // The image's rows [h w, dim] as embedded, and after the first blocks.
  const T::Tensor& embedded() const { return cut_.embedded; }
  const T::Tensor& first() const { return cut_.first; }
  // The image's rows after every block: runs the other blocks.
  T::Tensor rest() const { return cut_.rest(); }
  // The final layer on the image's rows: forward's [1, channels, h, w].
  T::Tensor out(const T::Tensor& image) const;

  // What a variant's blocks give (klein_dit.cpp's flux2 and flux3).
  struct Cut {
    T::Tensor embedded, first;
    std::function<T::Tensor()> rest;
    T::Tensor finalMod;  // the final layer's [1, 2 dim]: shift, scale
  };

 private:
  const KleinDit::Weights& w_;
  int64_t height_ = 0, width_ = 0;
  Cut cut_;
};

}  // namespace gizml::diffusion
