#pragma once
// The klein DiT's weights as klein_load.cpp takes them and klein_dit.cpp runs them: one layout for
// FLUX.2 [klein] and FLUX.3, the members of the other variant left empty. Fused where the file
// may split them (q, k, v as one [3 dim, dim] projection); the final modulation in BFL's order
// (shift, scale).
#include <gizml/diffusion.h>

#include <vector>

#include "dit_ops.h"

namespace gizml::diffusion {

// What differs between the variants beyond their blocks: the RoPE defaults and the positions.
struct KleinRules {
  double theta;         // RoPE's default theta
  double imageScale;    // image and reference (h, w) positions are (y, x) times this
  double refT0, refDT;  // reference i at t = refT0 + refDT i
  double refL0, refDL;  // and l = refL0 + refDL i
};
KleinRules kleinRules(KleinDit::Variant v);

// Attention over one run of tokens and a SwiGLU MLP (FLUX.2's double-block streams; FLUX.3's
// per-mode and joint blocks).
struct KleinStream {
  Projection qkv, out;       // [3 dim, dim], [dim, dim]
  T::Tensor qNorm, kNorm;    // [head dim]
  Projection mlpIn, mlpOut;  // [2 mlp, dim], [dim, mlp]
};

// FLUX.2's single block: one projection to q, k, v and the MLP's gate and value, one from
// [attention, MLP] back.
struct KleinFused {
  Projection in, out;  // [3 dim + 2 mlp, dim], [dim, dim + mlp]
  T::Tensor qNorm, kNorm;
};

struct KleinDoubleBlock {
  KleinStream img, txt;
};

// FLUX.3's three token modes.
enum KleinMode { kImage = 0, kCond = 1, kText = 2 };

struct KleinDit::Weights {
  KleinDit::Variant variant = KleinDit::Variant::Flux2;
  std::vector<int64_t> ropeAxes;
  double ropeTheta = 0;
  int64_t dim = 0, headDim = 0, mlp = 0, channels = 0, condChannels = 0, textDim = 0;
  Projection timeIn1, timeIn2;                     // sinusoid -> dim -> dim, SiLU between
  std::optional<Projection> targetIn1, targetIn2;  // FLUX.3 flow map
  Projection xEmbed, condEmbed, txtIn;             // condEmbed: FLUX.3's (FLUX.2 uses xEmbed)
  // FLUX.2
  Projection modImg, modTxt, modSingle;  // [6 dim, dim], [6 dim, dim], [3 dim, dim]
  std::vector<KleinDoubleBlock> doubles;
  std::vector<KleinFused> singles;
  // FLUX.3: per mode, [3 dim, dim] each
  std::vector<Projection> earlyMod, singleMod;
  std::vector<std::vector<KleinStream>> modeBlocks;  // by KleinMode
  std::vector<KleinStream> joint;
  Projection finalMod;  // [2 dim, dim]: shift, scale
  Projection projOut;   // [channels, dim]
};

}  // namespace gizml::diffusion
