// MiniMax H3's denoising pass on the CPU in F32, as diffusers' MiniMaxH3Transformer3DModel runs it
// over the packed layout of its pipeline's MiniMaxH3PrepareLayoutStep (t2va and fl2va:
// [text | keyframes | target audio | target video]), the AdaLN rows per (timestep, modality).
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gizml/netops.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "h3_model.h"

namespace gizml::diffusion {

namespace {

using Weights = H3Model::Weights;

constexpr double kFrameRescale = 5.0 / 3.0;            // rotary time of one video frame at 24 fps vs audio's 40/s
constexpr int kFramesPerLatent[5] = {1, 4, 4, 4, 4};   // the video VAE's frames per latent, cyclic
constexpr double kSpatialScale = 32.0;                 // spatial rotary axes span [0, 32) on a square
constexpr double kMaxPeriod = 10000.0;                 // the timestep sinusoid's

double frameSpan(int64_t frame) { return kFrameRescale * kFramesPerLatent[frame % 5]; }

// One aspect-normalized spatial axis of `dim` latent pixels in patches of 2: numpy's
// linspace(left, left + ratio, dim / 2, endpoint=False) x 32, ratio = dim / sqrt(area).
std::vector<double> spatialAxis(int64_t dim, double sqrtArea) {
  const int64_t n = dim / 2;
  const double ratio = static_cast<double>(dim) / sqrtArea, left = (1.0 - ratio) / 2.0, step = ratio / n;
  std::vector<double> axis;
  for (int64_t i = 0; i < n; ++i) axis.push_back((static_cast<double>(i) * step + left) * kSpatialScale);
  return axis;
}

}  // namespace

h3::Layout h3::layoutOf(const H3Condition& c, int64_t frames, int64_t height, int64_t width, int64_t audioLatents) {
  Layout l;
  const int64_t text = c.text.size(0);
  for (int64_t i = 0; i < text; ++i)
    l.add(static_cast<double>(i), 0, 0, c.textTags.empty() ? h3::kTextTag : c.textTags[static_cast<size_t>(i)],
          h3::kVideoT);
  const double sqrtArea = std::sqrt(static_cast<double>(height * width));
  const std::vector<double> hAxis = spatialAxis(height, sqrtArea), wAxis = spatialAxis(width, sqrtArea);
  const double origin = static_cast<double>(text);
  double duration = 0;
  for (int64_t f = 0; f < frames; ++f) duration += frameSpan(f);
  for (const H3Keyframe& k : c.keyframes) {
    const double t = k.last ? origin + duration - kFrameRescale : origin;
    for (double h : hAxis)
      for (double w : wAxis) l.add(t, h, w, h3::kVideoTag, h3::kKeyframeTIndex);
  }
  // Audio shares the video's clock (one unit a latent); no height, each channel at a width extreme.
  for (int ch = 0; ch < h3::kAudioChannels; ++ch)
    for (int64_t i = 0; i < audioLatents; ++i)
      l.add(origin + static_cast<double>(i), 0, ch == 0 ? wAxis.front() : wAxis.back(), h3::kAudioTag, h3::kAudioT);
  double t = origin;
  for (int64_t f = 0; f < frames; ++f) {
    for (double h : hAxis)
      for (double w : wAxis) l.add(t, h, w, h3::kVideoTag, h3::kVideoT);
    t += frameSpan(f);
  }
  return l;
}

// The rotary cosines and sines [rows, 1, 3 x freq] (the halves rotate-half pairs share): each
// axis's position times the shared inverse frequencies, in float32 as diffusers computes them.
h3::Rope h3::ropeOf(const Weights& w, const Layout& l) {
  const std::vector<float> inv = w.invFreq.toFloats();
  const int64_t f = static_cast<int64_t>(inv.size());
  std::vector<double> cosv, sinv;
  for (int64_t r = 0; r < l.rows; ++r)
    for (int a = 0; a < 3; ++a)
      for (int64_t j = 0; j < f; ++j) {
        const float angle = static_cast<float>(l.positions[static_cast<size_t>(3 * r + a)]) * inv[static_cast<size_t>(j)];
        cosv.push_back(std::cos(angle));
        sinv.push_back(std::sin(angle));
      }
  return {placed(w, T::tensor({l.rows, 1, 3 * f}, cosv)), placed(w, T::tensor({l.rows, 1, 3 * f}, sinv))};
}

namespace {

// Rotate-half RoPE on the leading 6 x freq channels of x [rows, heads, head dim]; the rest pass.
T::Tensor rotated(const T::Tensor& x, const h3::Rope& r) {
  const int64_t half = r.cos.size(2), d = x.size(2);
  const T::Lazy x1 = T::lazy(x.slice(2, 0, half)), x2 = T::lazy(x.slice(2, half, 2 * half));
  const T::Lazy c = T::lazy(r.cos), s = T::lazy(r.sin);
  std::vector<T::Tensor> parts = {(x1 * c - x2 * s).eval(), (x2 * c + x1 * s).eval()};
  if (2 * half < d) parts.push_back(x.slice(2, 2 * half, d));
  return T::concat(parts, 2);
}

// Self-attention over all rows of x [rows, hidden]; RoPE when given.
T::Tensor attention(const Weights& w, const h3::Block& b, const T::Tensor& x, const h3::Rope* rope) {
  const int64_t n = x.size(0), inner = w.heads * w.headDim;
  const T::Tensor qkv = b.qkv(x);  // [n, 3 inner]
  const auto part = [&](int64_t i) { return qkv.slice(1, i * inner, (i + 1) * inner).reshape({n, w.heads, w.headDim}); };
  T::Tensor q = rmsNorm(part(0), b.qNorm, h3::kEps), k = rmsNorm(part(1), b.kNorm, h3::kEps);
  if (rope) {
    q = rotated(q, *rope);
    k = rotated(k, *rope);
  }
  const T::Tensor o = netops::attention(q.transpose(0, 1).contiguous(), k.transpose(0, 1).contiguous(),
                                        part(2).transpose(0, 1).contiguous(),
                                        1.0 / std::sqrt(static_cast<double>(w.headDim)));
  return b.out(o.transpose(0, 1).reshape({n, inner}));
}

// fc2(silu(gate) value), fc1 giving [gate; value].
T::Tensor swiglu(const Weights& w, const h3::Block& b, const T::Tensor& x) {
  const T::Tensor gv = b.fc1(x);
  return b.fc2((T::lazy(gv.slice(1, 0, w.ffn)).silu() * T::lazy(gv.slice(1, w.ffn, 2 * w.ffn))).eval());
}

// The token refiner's plain pre-norm block.
T::Tensor refinerBlock(const Weights& w, const h3::Block& b, const T::Tensor& x) {
  const T::Tensor x1 = (T::lazy(x) + T::lazy(attention(w, b, rmsNorm(x, b.norm1, h3::kEps), nullptr))).eval();
  return (T::lazy(x1) + T::lazy(swiglu(w, b, rmsNorm(x1, b.norm2, h3::kEps)))).eval();
}

// The timestep sinusoid [cos, sin] of t (unscaled, in [0, 1]) in float32, as diffusers' Timesteps.
std::vector<double> sinusoid(double t, int64_t width) {
  const int64_t half = width / 2;
  std::vector<double> out(static_cast<size_t>(width));
  for (int64_t i = 0; i < half; ++i) {
    const float e = static_cast<float>(-std::log(kMaxPeriod)) * static_cast<float>(i) / static_cast<float>(half);
    const float arg = static_cast<float>(t) * std::exp(e);
    out[static_cast<size_t>(i)] = std::cos(arg);
    out[static_cast<size_t>(half + i)] = std::sin(arg);
  }
  return out;
}

void check(bool ok, const std::string& what) {
  if (!ok) throw Error("H3Model: " + what);
}

}  // namespace

int64_t h3::Mods::bytes() const {
  int64_t n = finalShift.numel() + finalScale.numel();
  for (const auto& b : blocks)
    for (const T::Tensor& t : b) n += t.numel();
  return n * 4;
}

h3::Mods h3::modulations(const Weights& w, const std::vector<double>& ts) {
  const int64_t n = static_cast<int64_t>(ts.size()), d = w.hidden;
  T::Tensor act;  // what every AdaLN projection reads [n, time width]
  if (w.adalnTable) {
    // A pruned checkpoint's curves: read linearly between grid points, already activated.
    const T::Tensor& table = *w.adalnTable;
    const int64_t grid = table.size(0);
    std::vector<T::Tensor> rows;
    for (double t : ts) {
      const float pos = std::clamp(static_cast<float>(t), 0.0f, 1.0f) * static_cast<float>(grid - 1);
      const int64_t i = std::min(static_cast<int64_t>(std::floor(pos)), grid - 2);
      const double frac = pos - static_cast<float>(i);
      const T::Lazy lo = T::lazy(table.slice(0, i, i + 1)), hi = T::lazy(table.slice(0, i + 1, i + 2));
      rows.push_back((lo + (hi - lo) * T::Lazy(frac)).eval());
    }
    act = T::concat(rows, 0);
  } else {
    std::vector<double> freq;
    for (double t : ts) {
      const std::vector<double> s = sinusoid(t, w.freqDim);
      freq.insert(freq.end(), s.begin(), s.end());
    }
    const T::Tensor hidden = T::lazy(linear(*w.timeIn, placed(w, T::tensor({n, w.freqDim}, freq)))).silu().eval();
    act = T::lazy(linear(*w.timeOut, hidden)).silu().eval();
  }
  Mods m;
  for (const Block& b : w.blocks) {
    const T::Tensor rows = linear(*b.adaln, act).reshape({n * kModalities, 6 * d});
    std::array<T::Tensor, 6> parts;
    for (int64_t i = 0; i < 6; ++i) parts[static_cast<size_t>(i)] = rows.slice(1, i * d, (i + 1) * d).contiguous();
    m.blocks.push_back(std::move(parts));
  }
  const T::Tensor f = linear(w.finalAdaln, act);
  m.finalShift = f.slice(1, 0, d).contiguous();
  m.finalScale = f.slice(1, d, 2 * d).contiguous();
  return m;
}

T::Tensor h3::block(const Weights& w, const Block& b, const T::Tensor& x, const std::array<T::Tensor, 6>& mods,
                    const T::Tensor& modRows, const Rope& rope) {
  const auto row = [&](int i) { return T::lazy(T::indexSelect(mods[static_cast<size_t>(i)], 0, modRows)); };
  const T::Tensor h = (T::lazy(rmsNorm(x, b.norm1, kEps)) * (T::Lazy(1.0) + row(1)) + row(0)).eval();
  const T::Tensor x1 = (T::lazy(x) + row(2) * T::lazy(attention(w, b, h, &rope))).eval();
  const T::Tensor g = (T::lazy(rmsNorm(x1, b.norm2, kEps)) * (T::Lazy(1.0) + row(4)) + row(3)).eval();
  return (T::lazy(x1) + row(5) * T::lazy(swiglu(w, b, g))).eval();
}

H3Latents h3::pass(const Weights& w, const H3Latents& x, const H3Condition& c, const Mods& mods) {
  const T::Tensor& video = x.video;
  const T::Tensor& audio = x.audio;
  const int64_t ch = w.videoChannels;
  check(video.ndim() == 4 && video.size(0) == ch && video.size(1) >= 1 && video.size(2) >= 2 &&
            video.size(3) >= 2 && video.size(2) % 2 == 0 && video.size(3) % 2 == 0,
        "video latent of shape " + T::shapeText(video.shape()) + " is not [" + std::to_string(ch) +
            ", frames, h, w] with h, w even");
  check(audio.ndim() == 3 && audio.size(0) == kAudioChannels && audio.size(1) >= 1 &&
            audio.size(2) == w.audioChannels,
        "audio latent of shape " + T::shapeText(audio.shape()) + " is not [2, latents, " +
            std::to_string(w.audioChannels) + "]");
  check(c.text.ndim() == 2 && c.text.size(0) >= 1 && c.text.size(1) == w.textDim,
        "text of shape " + T::shapeText(c.text.shape()) + " is not [tokens, " + std::to_string(w.textDim) + "]");
  check(c.textTags.empty() || static_cast<int64_t>(c.textTags.size()) == c.text.size(0),
        std::to_string(c.textTags.size()) + " text tags for " + std::to_string(c.text.size(0)) + " tokens");
  for (int tag : c.textTags) check(tag == kTextTag || tag == kVideoTag, "a text tag is " + std::to_string(tag) + ", not 0 or 1");
  const int64_t frames = video.size(1), height = video.size(2), width = video.size(3);
  const int64_t hp = height / 2, wp = width / 2, frameRows = hp * wp, audioLatents = audio.size(1);
  const auto patches = [&](const T::Tensor& v) {  // [ch, f, h, w] -> [f h/2 w/2, ch 2 2]
    const int64_t f = v.size(1);
    return placed(w, v).cast(DType::F32).reshape({ch, f, hp, 2, wp, 2}).permute({1, 2, 4, 0, 3, 5}).contiguous().reshape(
        {f * frameRows, ch * 4});
  };
  for (const H3Keyframe& k : c.keyframes)
    check(k.latent.ndim() == 4 && k.latent.size(0) == ch && k.latent.size(1) == 1 && k.latent.size(2) == height &&
              k.latent.size(3) == width,
          "keyframe latent of shape " + T::shapeText(k.latent.shape()) + " is not [" + std::to_string(ch) + ", 1, " +
              std::to_string(height) + ", " + std::to_string(width) + "]");

  const Layout layout = layoutOf(c, frames, height, width, audioLatents);
  const Rope rope = ropeOf(w, layout);
  const T::Tensor modRows = placed(w, T::tensor({layout.rows}, layout.modRows, DType::I64));
  const T::Tensor timeRows = placed(w, T::tensor({layout.rows}, layout.timeRows, DType::I64));

  T::Tensor text = linear(w.textIn, placed(w, c.text.cast(DType::F32).contiguous()));
  for (const Block& b : w.refiner) text = refinerBlock(w, b, text);
  std::vector<T::Tensor> parts = {rmsNorm(text, w.refinerNorm, kEps)};
  for (const H3Keyframe& k : c.keyframes) parts.push_back(linear(w.videoIn, patches(k.latent)));
  parts.push_back(linear(w.audioIn, placed(w, audio).cast(DType::F32).contiguous().reshape({kAudioChannels * audioLatents,
                                                                                  w.audioChannels})));
  parts.push_back(linear(w.videoIn, patches(video)));
  T::Tensor h = T::concat(parts, 0);
  for (size_t i = 0; i < w.blocks.size(); ++i) h = block(w, w.blocks[i], h, mods.blocks[i], modRows, rope);

  const T::Lazy shift = T::lazy(T::indexSelect(mods.finalShift, 0, timeRows));
  const T::Lazy scale = T::lazy(T::indexSelect(mods.finalScale, 0, timeRows));
  const T::Tensor out = (T::lazy(rmsNorm(h, w.finalNorm, kEps)) * (T::Lazy(1.0) + scale) + shift).eval();
  const int64_t videoStart = layout.rows - frames * frameRows, audioStart = videoStart - kAudioChannels * audioLatents;
  const T::Tensor v = linear(w.videoOut, out.slice(0, videoStart, layout.rows).contiguous());
  const T::Tensor a = linear(w.audioOut, out.slice(0, audioStart, videoStart).contiguous());
  return {v.reshape({frames, hp, wp, ch, 2, 2}).permute({3, 0, 1, 4, 2, 5}).contiguous().reshape(
              {ch, frames, height, width}),
          a.reshape({kAudioChannels, audioLatents, w.audioChannels})};
}

H3Latents H3Model::forward(const H3Latents& x, double videoT, double audioT, const H3Condition& condition) const {
  check(videoT >= 0.0 && videoT <= 1.0 && audioT >= 0.0 && audioT <= 1.0,
        "t " + std::to_string(videoT) + ", " + std::to_string(audioT) + " not in [0, 1]");
  const Weights& w = *weights_;
  return h3::pass(w, x, condition, h3::modulations(w, {videoT, audioT, std::max(videoT, h3::kKeyframeT)}));
}

}  // namespace gizml::diffusion
