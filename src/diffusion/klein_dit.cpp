// The klein DiT's forward pass in F32 on the CPU: FLUX.2 [klein] as diffusers'
// transformer_flux2.py (Flux2Transformer2DModel, no guidance) computes it, FLUX.3 as
// transformer_flux3.py (Flux3Transformer2DModel); the parts they share (the modulated LayerNorm,
// attention with q/k RMSNorm and RoPE, SwiGLU) written once; cut where the step cache decides
// (klein_pass.h), and the step cache's rule.
#include <gizml/diffusion.h>
#include <gizml/netops.h>

#include <cmath>
#include <limits>
#include <string>

#include "klein_pass.h"

namespace gizml::diffusion {
namespace {

using Weights = KleinDit::Weights;

constexpr double kEps = 1e-6;  // the LayerNorms' and the q/k RMSNorms'

// Chunk i of width d of modulation rows m [rows, k d].
T::Tensor chunk(const T::Tensor& m, int64_t i, int64_t d) { return m.slice(1, i * d, (i + 1) * d); }

// (1 + scale) LayerNorm(x) + shift, the LayerNorm without affine.
T::Tensor modulated(const T::Tensor& x, const T::Tensor& shift, const T::Tensor& scale) {
  const int64_t d = x.size(1);
  const T::Tensor n = netops::layerNorm(x, T::ones({d}), T::zeros({d}), kEps)[0];
  return ((T::Lazy(1.0) + T::lazy(scale)) * T::lazy(n) + T::lazy(shift)).eval();
}

// x + gate y.
T::Tensor gated(const T::Tensor& x, const T::Tensor& gate, const T::Tensor& y) {
  return (T::lazy(x) + T::lazy(gate) * T::lazy(y)).eval();
}

struct Heads {
  T::Tensor q, k, v;  // [tokens, heads, head dim], q and k normed
};

// The q, k, v at the start of rows [tokens, >= 3 dim], q and k through their RMSNorms.
Heads headsOf(const Weights& w, const T::Tensor& rows, const T::Tensor& qNorm, const T::Tensor& kNorm) {
  const int64_t n = rows.size(0), d = w.dim;
  const auto part = [&](int64_t i) {
    return rows.slice(1, i * d, (i + 1) * d).contiguous().reshape({n, d / w.headDim, w.headDim});
  };
  return {rmsNorm(part(0), qNorm, kEps), rmsNorm(part(1), kNorm, kEps), part(2)};
}

Heads joined(const Heads& a, const Heads& b) {
  return {T::concat({a.q, b.q}, 0), T::concat({a.k, b.k}, 0), T::concat({a.v, b.v}, 0)};
}

// Attention of all tokens to all, after RoPE: [tokens, dim]. With reference keys (the
// references' tokens last in h when recorded, absent when read), block's are kept or read.
T::Tensor attend(const Weights& w, const Heads& h, const Rope& r, ReferenceKeys* refs = nullptr, size_t block = 0) {
  const int64_t n = h.q.size(0);
  const T::Tensor q = rotated(h.q, r).transpose(0, 1).contiguous();
  T::Tensor k = rotated(h.k, r).transpose(0, 1).contiguous();
  T::Tensor v = h.v.transpose(0, 1).contiguous();
  if (refs && refs->use == ReferenceKeys::Use::Record) {
    refs->keys[block] = k.slice(1, n - refs->tokens, n).contiguous();
    refs->values[block] = v.slice(1, n - refs->tokens, n).contiguous();
  } else if (refs) {
    k = T::concat({k, refs->keys[block]}, 1);
    v = T::concat({v, refs->values[block]}, 1);
  }
  const T::Tensor o = netops::attention(q, k, v, 1.0 / std::sqrt(static_cast<double>(w.headDim)));
  return o.transpose(0, 1).contiguous().reshape({n, w.dim});
}

// SwiGLU of rows [tokens, 2 m]: silu(first half) times the second.
T::Tensor swiglu(const T::Tensor& h) {
  const int64_t m = h.size(1) / 2;
  return (T::lazy(h.slice(1, 0, m)).silu() * T::lazy(h.slice(1, m, 2 * m))).eval();
}

T::Tensor mlp(const KleinStream& s, const T::Tensor& x) { return s.mlpOut(swiglu(s.mlpIn(x))); }

T::Tensor silu(const T::Tensor& x) { return T::lazy(x).silu().eval(); }

// The time embedding of t (in [0, 1]): the sinusoid of 1000 t in float32 through in1, SiLU, in2.
T::Tensor timeEmbedding(const Projection& in1, const Projection& in2, double t) {
  const float scaled = static_cast<float>(t) * 1000.0f;
  return in2(silu(in1(timeSinusoid(scaled, in1.w.values.size(1)))));
}

// A latent [1, c, h, w] as tokens [h w, c], row by row.
T::Tensor tokensOf(const T::Tensor& latent) {
  const int64_t c = latent.size(1), n = latent.size(2) * latent.size(3);
  return latent.cast(DType::F32).reshape({c, n}).transpose(0, 1).contiguous();
}

// Positions (t, h, w, l), four values a token.
struct Positions {
  std::vector<double> v;

  void text(int64_t tokens) {
    for (int64_t l = 0; l < tokens; ++l) v.insert(v.end(), {0.0, 0.0, 0.0, static_cast<double>(l)});
  }
  void grid(int64_t h, int64_t w, double scale, double t, double l) {
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        v.insert(v.end(), {t, scale * static_cast<double>(y), scale * static_cast<double>(x), l});
  }
  void append(const Positions& o) { v.insert(v.end(), o.v.begin(), o.v.end()); }
};

struct Inputs {
  T::Tensor image, refs, text;  // tokens: [n, c], [nRef, c'] (unset when nRef = 0), [L, text dim]
  int64_t nRef = 0;
  Positions imagePos, refPos, textPos;
};

// One double-stream block: the image and text streams, each modulated by its rows, attending to both.
void doubleBlock(const Weights& w, const KleinDoubleBlock& b, const T::Tensor& mImg, const T::Tensor& mTxt,
                 const Rope& rope, T::Tensor& img, T::Tensor& txt, ReferenceKeys* refs, size_t block) {
  const int64_t d = w.dim, nText = txt.size(0);
  const Heads hi =
      headsOf(w, b.img.qkv(modulated(img, chunk(mImg, 0, d), chunk(mImg, 1, d))), b.img.qNorm, b.img.kNorm);
  const Heads ht =
      headsOf(w, b.txt.qkv(modulated(txt, chunk(mTxt, 0, d), chunk(mTxt, 1, d))), b.txt.qNorm, b.txt.kNorm);
  const T::Tensor o = attend(w, joined(ht, hi), rope, refs, block);  // [text, image]
  const int64_t n = o.size(0);
  img = gated(img, chunk(mImg, 2, d), b.img.out(o.slice(0, nText, n).contiguous()));
  img = gated(img, chunk(mImg, 5, d), mlp(b.img, modulated(img, chunk(mImg, 3, d), chunk(mImg, 4, d))));
  txt = gated(txt, chunk(mTxt, 2, d), b.txt.out(o.slice(0, 0, nText).contiguous()));
  txt = gated(txt, chunk(mTxt, 5, d), mlp(b.txt, modulated(txt, chunk(mTxt, 3, d), chunk(mTxt, 4, d))));
}

// FLUX.2: the first double-stream block, then the others and the single blocks.
KleinPass::Cut flux2(const Weights& w, const Inputs& in, double sigma, ReferenceKeys* refs) {
  const int64_t d = w.dim, nText = in.text.size(0), nImage = in.image.size(0);
  const T::Tensor t = silu(timeEmbedding(w.timeIn1, w.timeIn2, sigma));
  const T::Tensor mImg = w.modImg(t), mTxt = w.modTxt(t), mSingle = w.modSingle(t);

  // pipeline_flux2_klein.py: the references' tokens follow the image's in the image stream.
  T::Tensor img = w.xEmbed(in.nRef ? T::concat({in.image, in.refs}, 0) : in.image);
  T::Tensor txt = w.txtIn(in.text);
  Positions all = in.textPos;
  all.append(in.imagePos);
  all.append(in.refPos);
  const Rope rope = ropeTables(all.v, w.ropeAxes, w.ropeTheta);

  const auto imageRows = [nImage](const T::Tensor& stream) { return stream.slice(0, 0, nImage).contiguous(); };
  KleinPass::Cut cut;
  cut.embedded = imageRows(img);
  doubleBlock(w, w.doubles[0], mImg, mTxt, rope, img, txt, refs, 0);
  cut.first = imageRows(img);
  cut.rest = [&w, mImg, mTxt, mSingle, rope, img, txt, d, nText, nImage, refs] {
    T::Tensor i = img, tx = txt;
    for (size_t b = 1; b < w.doubles.size(); ++b) doubleBlock(w, w.doubles[b], mImg, mTxt, rope, i, tx, refs, b);
    T::Tensor x = T::concat({tx, i}, 0);
    for (size_t b = 0; b < w.singles.size(); ++b) {
      const KleinFused& s = w.singles[b];
      const T::Tensor h = s.in(modulated(x, chunk(mSingle, 0, d), chunk(mSingle, 1, d)));  // [n, 3 dim + 2 mlp]
      const T::Tensor a = attend(w, headsOf(w, h, s.qNorm, s.kNorm), rope, refs, w.doubles.size() + b);
      const T::Tensor m = swiglu(h.slice(1, 3 * d, 3 * d + 2 * w.mlp).contiguous());
      x = gated(x, chunk(mSingle, 2, d), s.out(T::concat({a, m}, 1)));
    }
    return x.slice(0, nText, nText + nImage).contiguous();
  };
  cut.finalMod = w.finalMod(t);
  return cut;
}

// One FLUX.3 per-mode block: attention within the mode and the MLP, in parallel.
T::Tensor modeBlock(const Weights& w, const KleinStream& b, const T::Tensor& x, const T::Tensor& m, const Rope& r) {
  const int64_t d = w.dim;
  const T::Tensor nx = modulated(x, chunk(m, 0, d), chunk(m, 1, d));
  const T::Tensor a = b.out(attend(w, headsOf(w, b.qkv(nx), b.qNorm, b.kNorm), r));
  return gated(x, chunk(m, 2, d), (T::lazy(a) + T::lazy(mlp(b, nx))).eval());
}

// FLUX.3: the per-mode blocks, then the joint blocks.
KleinPass::Cut flux3(const Weights& w, const Inputs& in, double sigma, double target, ReferenceKeys* refs) {
  const int64_t d = w.dim, nText = in.text.size(0), nImage = in.image.size(0), nRef = in.nRef;
  // The image at sigma, the text and references at 0; a flow map adds the target's embedding.
  T::Tensor tImage = timeEmbedding(w.timeIn1, w.timeIn2, sigma), tZero = timeEmbedding(w.timeIn1, w.timeIn2, 0.0);
  if (w.targetIn1) {
    const T::Tensor tt = timeEmbedding(*w.targetIn1, *w.targetIn2, target);
    tImage = (T::lazy(tImage) + T::lazy(tt)).eval();
    tZero = (T::lazy(tZero) + T::lazy(tt)).eval();
  }
  const T::Tensor sImage = silu(tImage), sZero = silu(tZero);
  const auto act = [&](int mode) { return mode == kImage ? sImage : sZero; };

  std::vector<T::Tensor> x = {w.xEmbed(in.image), nRef ? w.condEmbed(in.refs) : T::Tensor(), w.txtIn(in.text)};
  KleinPass::Cut cut;
  cut.embedded = x[kImage];
  const std::vector<const Positions*> pos = {&in.imagePos, &in.refPos, &in.textPos};
  for (int mode : {kText, kImage, kCond}) {
    if (mode == kCond && nRef == 0) continue;
    const size_t i = static_cast<size_t>(mode);
    const Rope r = ropeTables(pos[i]->v, w.ropeAxes, w.ropeTheta);
    const T::Tensor m = w.earlyMod[i](act(mode));
    for (const KleinStream& b : w.modeBlocks[i]) x[i] = modeBlock(w, b, x[i], m, r);
  }
  cut.first = x[kImage];

  // The joint blocks over [text, image, references], each mode modulated by its own rows.
  Positions all = in.textPos;
  all.append(in.imagePos);
  all.append(in.refPos);
  const Rope rope = ropeTables(all.v, w.ropeAxes, w.ropeTheta);
  std::vector<int> modes = {kText, kImage};
  if (nRef) modes.push_back(kCond);
  std::vector<T::Tensor> mods(3);
  for (int mode : modes) mods[static_cast<size_t>(mode)] = w.singleMod[static_cast<size_t>(mode)](act(mode));
  cut.rest = [&w, x, modes, mods, rope, d, nText, nImage, nRef, refs] {
    std::vector<T::Tensor> y = x;
    const int64_t ends[] = {nText + nImage, nText + nImage + nRef, nText};  // by mode
    const int64_t starts[] = {nText, nText + nImage, 0};
    for (size_t j = 0; j < w.joint.size(); ++j) {
      const KleinStream& b = w.joint[j];
      std::vector<T::Tensor> normed;
      for (int mode : modes) {
        const T::Tensor& m = mods[static_cast<size_t>(mode)];
        normed.push_back(modulated(y[static_cast<size_t>(mode)], chunk(m, 0, d), chunk(m, 1, d)));
      }
      const T::Tensor comb = T::concat(normed, 0);
      const T::Tensor a = b.out(attend(w, headsOf(w, b.qkv(comb), b.qNorm, b.kNorm), rope, refs, j));
      const T::Tensor out = (T::lazy(a) + T::lazy(mlp(b, comb))).eval();
      for (int mode : modes) {
        const size_t i = static_cast<size_t>(mode);
        y[i] = gated(y[i], chunk(mods[i], 2, d), out.slice(0, starts[i], ends[i]).contiguous());
      }
    }
    return y[kImage];
  };
  cut.finalMod = w.finalMod(sImage);
  return cut;
}

double meanAbs(const T::Lazy& x) { return x.abs().eval().mean().item(); }

void checkLatent(const T::Tensor& t, int64_t channels, const std::string& what) {
  if (t.ndim() != 4 || t.size(0) != 1 || t.size(1) != channels || t.size(2) < 1 || t.size(3) < 1 || !isFloat(t.dtype()))
    throw Error("KleinDit::forward: " + what + " of shape " + T::shapeText(t.shape()) + " is not a float [1, " +
                std::to_string(channels) + ", h, w]");
}

}  // namespace

KleinPass::KleinPass(const KleinDit& dit, const T::Tensor& latent, const std::vector<T::Tensor>& references,
                     const T::Tensor& text, double sigma, double targetSigma, ReferenceKeys* keys)
    : w_(*dit.weights_) {
  const Weights& w = w_;
  checkLatent(latent, w.channels, "latent");
  for (size_t i = 0; i < references.size(); ++i)
    checkLatent(references[i], w.condChannels, "reference " + std::to_string(i));
  if (text.ndim() != 2 || text.size(0) < 1 || text.size(1) != w.textDim || !isFloat(text.dtype()))
    throw Error("KleinDit::forward: text of shape " + T::shapeText(text.shape()) + " is not a float [tokens, " +
                std::to_string(w.textDim) + "]");
  for (double s : {sigma, targetSigma})
    if (!(s >= 0.0 && s <= 1.0)) throw Error("KleinDit::forward: sigma " + std::to_string(s) + " is not in [0, 1]");

  const KleinRules rules = kleinRules(w.variant);
  height_ = latent.size(2);
  width_ = latent.size(3);
  Inputs in;
  in.image = tokensOf(latent.host());
  in.text = text.host().cast(DType::F32).contiguous();
  in.textPos.text(text.size(0));
  in.imagePos.grid(height_, width_, rules.imageScale, 0.0, 0.0);
  std::vector<T::Tensor> refs;
  for (size_t i = 0; i < references.size(); ++i) {
    const T::Tensor& r = references[i];
    const double k = static_cast<double>(i);
    refs.push_back(tokensOf(r.host()));
    in.refPos.grid(r.size(2), r.size(3), rules.imageScale, rules.refT0 + rules.refDT * k,
                   rules.refL0 + rules.refDL * k);
  }
  if (!refs.empty()) {
    in.refs = T::concat(refs, 0);
    in.nRef = in.refs.size(0);
  }
  ReferenceKeys* kept = refs.empty() ? nullptr : keys;
  if (kept) {
    const bool flux2 = w.variant == KleinDit::Variant::Flux2;
    const size_t blocks = flux2 ? w.doubles.size() + w.singles.size() : w.joint.size();
    if (kept->use == ReferenceKeys::Use::Record) {
      kept->tokens = in.nRef;
      kept->keys.assign(blocks, {});
      kept->values.assign(blocks, {});
    } else {
      if (kept->tokens != in.nRef || kept->keys.size() != blocks)
        throw Error("KleinDit::forward: the references have " + std::to_string(in.nRef) +
                    " tokens, and the step cache kept the keys of " + std::to_string(kept->tokens));
      in.refs = T::Tensor();
      in.nRef = 0;
      in.refPos = Positions();
    }
  }
  cut_ = w.variant == KleinDit::Variant::Flux2 ? flux2(w, in, sigma, kept) : flux3(w, in, sigma, targetSigma, kept);
}

T::Tensor KleinPass::out(const T::Tensor& image) const {
  const int64_t d = w_.dim;
  const T::Tensor o = w_.projOut(modulated(image, chunk(cut_.finalMod, 0, d), chunk(cut_.finalMod, 1, d)));
  return o.transpose(0, 1).contiguous().reshape({1, w_.channels, height_, width_});
}

KleinStepCache::KleinStepCache(double threshold, int64_t steps, int64_t refresh)
    : threshold_(threshold), steps_(steps), refresh_(refresh) {
  if (!(threshold >= 0)) throw Error("KleinStepCache: threshold " + std::to_string(threshold) + " is negative or NaN");
  if (steps < 1) throw Error("KleinStepCache: steps " + std::to_string(steps) + " is below 1");
  if (refresh < 0) throw Error("KleinStepCache: refresh " + std::to_string(refresh) + " is negative");
}

T::Tensor KleinDit::forward(const T::Tensor& latent, const std::vector<T::Tensor>& references, const T::Tensor& text,
                            double sigma, double targetSigma) const {
  const KleinPass pass(*this, latent, references, text, sigma, targetSigma);
  return pass.out(pass.rest());
}

T::Tensor KleinDit::forward(const T::Tensor& latent, const std::vector<T::Tensor>& references, const T::Tensor& text,
                            double sigma, double targetSigma, KleinStepCache& cache) const {
  if (cache.done_ == cache.steps_)
    throw Error("KleinDit::forward: the step cache's " + std::to_string(cache.steps_) + " steps are all done");
  const int64_t step = cache.done_;
  // With refresh, the references run at the first step and once refresh steps have passed since
  // their keys were kept; between, the pass reads those keys.
  const bool refreshing = cache.refresh_ > 1 && !references.empty();
  ReferenceKeys keys;
  if (refreshing && !cache.referenceKeys_.empty() && step - cache.referencesRanAt_ < cache.refresh_)
    keys = {ReferenceKeys::Use::Read, cache.referenceKeys_, cache.referenceValues_,
            cache.referenceKeys_.front().size(1)};
  const KleinPass pass(*this, latent, references, text, sigma, targetSigma, refreshing ? &keys : nullptr);
  // Keys are kept only from a step that ran every block (a skipped one recorded the first's only).
  const auto ranEveryBlock = [&](const T::Tensor& out) {
    if (refreshing && keys.use == ReferenceKeys::Use::Record) {
      cache.referenceKeys_ = std::move(keys.keys);
      cache.referenceValues_ = std::move(keys.values);
      cache.referencesRanAt_ = step;
      ++cache.referenceRuns_;
    }
    return out;
  };
  if (cache.threshold_ == 0) {
    const T::Tensor out = pass.out(pass.rest());
    ++cache.done_;
    cache.lastSkipped_ = false;
    return ranEveryBlock(out);
  }
  // A failed call leaves the cache as it was.
  const T::Tensor first = (T::lazy(pass.first()) - T::lazy(pass.embedded())).eval();
  double change = 0;  // summed since the last step that ran every block
  if (step > 0) {
    if (first.shape() != cache.first_.shape())
      throw Error("KleinDit::forward: a latent of " + std::to_string(first.size(0)) +
                  " tokens in a step cache's run of " + std::to_string(cache.first_.size(0)));
    // The relative change of what the first blocks added; none before is a change of all.
    const double previous = meanAbs(T::lazy(cache.first_));
    change = cache.change_ + (previous > 0 ? meanAbs(T::lazy(first) - T::lazy(cache.first_)) / previous
                                           : std::numeric_limits<double>::infinity());
  }
  const bool skip = step > 0 && step + 1 < cache.steps_ && change < cache.threshold_;
  ++cache.done_;
  cache.first_ = first;
  cache.lastSkipped_ = skip;
  cache.change_ = skip ? change : 0;
  if (skip) {
    ++cache.skipped_;
    return pass.out((T::lazy(pass.first()) + T::lazy(cache.rest_)).eval());
  }
  const T::Tensor after = pass.rest();
  cache.rest_ = (T::lazy(after) - T::lazy(pass.first())).eval();
  return ranEveryBlock(pass.out(after));
}

}  // namespace gizml::diffusion
