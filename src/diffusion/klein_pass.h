#pragma once
// KleinDit::forward in the parts the step cache tells apart (klein_dit.cpp): the first blocks
// (FLUX.2's first double-stream block, FLUX.3's per-mode blocks), the other blocks, and the final
// layer on the image's rows. forward is out(rest()); a step the cache skips is out(first() plus
// what the other blocks added at an earlier step).
#include <gizml/diffusion.h>

#include <functional>
#include <vector>

#include "klein_weights.h"

namespace gizml::diffusion {

class KleinPass {
 public:
  // forward's inputs, checked as forward says; embeds them and runs the first blocks.
  KleinPass(const KleinDit& dit, const T::Tensor& latent, const std::vector<T::Tensor>& references,
            const T::Tensor& text, double sigma, double targetSigma);

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
