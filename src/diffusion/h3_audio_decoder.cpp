// MiniMax H3's audio decoder as diffusers runs it (models/autoencoders/autoencoder_kl_minimax_h3_audio.py:
// dec_in_proj, then MiniMaxH3AudioBigVGANDecoder): the weights by their stored names (weight_g / weight_v
// folded as torch's weight_norm does, or folded already), sizes from their shapes; F32 on the CPU, time
// first ([samples, channels]) with netops' conv1d and convTranspose1d; the anti-aliased SnakeBeta (2x up,
// activation, 2x down through the stored Kaiser filters) in one pass here, its resamplers being depthwise.
#include <gizml/diffusion.h>
#include <gizml/netops.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "h3_latents.h"
#include "weight_file.h"

namespace gizml::diffusion {

namespace {

struct Conv {
  T::Tensor w;              // [o, c, k] (a transposed one: [c, o, k])
  std::vector<T::Tensor> b;  // [o], or none
  int64_t dilation = 1;
};

// Anti-aliased SnakeBeta: x + sin(e^alpha x)² / (e^beta + 1e-9) at twice the rate.
struct Activation {
  std::vector<float> alpha, beta;  // e^alpha, 1 / (e^beta + 1e-9) per channel
  std::vector<float> up, down;     // the resamplers' filters [k]
};

struct AmpBlock {
  std::vector<Conv> convs1, convs2;  // a pair a dilation
  std::vector<Activation> acts;      // two a pair
};

struct Stage {
  Conv up;
  int64_t rate = 0;
  std::vector<AmpBlock> blocks;
};

constexpr int64_t kRatio = 2;  // the activations' resampling ratio

}  // namespace

struct H3AudioDecoder::Weights {
  H3AudioConfig config;
  int64_t channels = 0, hop = 1;
  T::Tensor inW, inB;  // dec_in_proj as [latent dim, channels], [latent dim]
  Conv pre, post;
  std::vector<Stage> stages;
  Activation postAct;
  std::vector<float> mean, std;
};

namespace {

using Weights = H3AudioDecoder::Weights;

class Reader : public WeightFile {
 public:
  explicit Reader(const std::string& path) : WeightFile(path, "", "a MiniMax H3 audio decoder") {}

  bool hasConv(const std::string& name) const { return has(name + ".weight_v") || has(name + ".weight"); }

  // A convolution's stored shape (of weight_v or weight), which must have 3 axes.
  T::Shape convShape(const std::string& name) const {
    const std::string w = has(name + ".weight_v") ? name + ".weight_v" : name + ".weight";
    const T::Shape s = shapeOf(w);
    if (s.size() != 3 || s[0] < 1 || s[1] < 1 || s[2] < 1) fail(w, "has shape " + T::shapeText(s) + ", expected 3 axes");
    return s;
  }

  // weight_norm's weight g v / |v| (the norm over all but axis 0), or the folded weight; a bias of
  // `bias` values (0: none).
  Conv conv(const std::string& name, const T::Shape& shape, int64_t bias, int64_t dilation = 1) {
    Conv c;
    c.dilation = dilation;
    if (has(name + ".weight_v")) {
      const T::Tensor v = take(name + ".weight_v", shape);
      const T::Tensor g = take(name + ".weight_g", {shape[0], 1, 1});
      const int64_t per = shape[1] * shape[2];
      c.w = T::empty(shape);
      const float* vp = v.data<float>();
      const float* gp = g.data<float>();
      float* wp = c.w.data<float>();
      for (int64_t o = 0; o < shape[0]; ++o) {
        double sum = 0;
        for (int64_t i = 0; i < per; ++i) sum += double(vp[o * per + i]) * vp[o * per + i];
        const float scale = gp[o] / static_cast<float>(std::sqrt(sum));
        for (int64_t i = 0; i < per; ++i) wp[o * per + i] = vp[o * per + i] * scale;
      }
    } else {
      c.w = take(name + ".weight", shape);
    }
    if (bias > 0) c.b = {take(name + ".bias", {bias})};
    return c;
  }

  std::vector<float> values(const std::string& name, const T::Shape& shape) { return take(name, shape).toFloats(); }

  Activation activation(const std::string& name, int64_t channels) {
    Activation a;
    for (float v : values(name + ".act.alpha", {channels})) a.alpha.push_back(std::exp(v));
    for (float v : values(name + ".act.beta", {channels})) a.beta.push_back(1.0f / (std::exp(v) + 1e-9f));
    const T::Shape up = shapeOf(name + ".upsample.filter");
    if (up.size() != 3 || up[0] != 1 || up[1] != 1 || up[2] < kRatio)
      fail(name + ".upsample.filter", "has shape " + T::shapeText(up) + ", expected [1, 1, k]");
    a.up = values(name + ".upsample.filter", up);
    a.down = values(name + ".downsample.lowpass.filter", up);
    return a;
  }
};

// x [n, c] with `left` and `right` copies of its first and last rows around it.
std::vector<float> replicatePadded(const float* x, int64_t n, int64_t c, int64_t left, int64_t right) {
  std::vector<float> out(static_cast<size_t>((n + left + right) * c));
  for (int64_t i = 0; i < n + left + right; ++i) {
    const int64_t src = std::clamp<int64_t>(i - left, 0, n - 1);
    std::copy(x + src * c, x + (src + 1) * c, out.begin() + i * c);
  }
  return out;
}

// diffusers' MiniMaxH3AudioActivation1d on x [n, c]: the 2x upsampler (replicate pad, transposed depthwise
// filter, times 2, cropped), SnakeBeta, the 2x low-pass downsampler (replicate pad, strided filter): [n, c].
T::Tensor activate(const Activation& a, const T::Tensor& xIn) {
  const T::Tensor x = xIn.contiguous();
  const int64_t n = x.size(0), c = x.size(1), k = static_cast<int64_t>(a.up.size());
  const int64_t pad = k / kRatio - 1, cropLeft = pad * kRatio + (k - kRatio) / 2;
  const std::vector<float> xp = replicatePadded(x.data<float>(), n, c, pad, pad);
  const int64_t padded = n + 2 * pad;
  std::vector<float> up(static_cast<size_t>(kRatio * n * c), 0.0f), acc(static_cast<size_t>(c));
  for (int64_t m = 0; m < kRatio * n; ++m) {
    const int64_t o = m + cropLeft;  // the transposed convolution's output index
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t j = o % kRatio; j < k; j += kRatio) {
      const int64_t i = (o - j) / kRatio;
      if (i < 0 || i >= padded) continue;
      const float f = a.up[static_cast<size_t>(j)];
      const float* row = xp.data() + i * c;
      for (int64_t ch = 0; ch < c; ++ch) acc[static_cast<size_t>(ch)] += row[ch] * f;
    }
    float* out = up.data() + m * c;
    for (int64_t ch = 0; ch < c; ++ch) {
      const float v = static_cast<float>(kRatio) * acc[static_cast<size_t>(ch)];
      const float s = std::sin(a.alpha[static_cast<size_t>(ch)] * v);
      out[ch] = v + a.beta[static_cast<size_t>(ch)] * (s * s);
    }
  }
  const int64_t kd = static_cast<int64_t>(a.down.size());
  const int64_t padLeft = kd / 2 - (kd % 2 == 0 ? 1 : 0), padRight = kd / 2;
  const std::vector<float> dp = replicatePadded(up.data(), kRatio * n, c, padLeft, padRight);
  T::Tensor y = T::empty({n, c});
  float* yp = y.data<float>();
  for (int64_t o = 0; o < n; ++o) {
    float* out = yp + o * c;
    for (int64_t j = 0; j < kd; ++j) {
      const float f = a.down[static_cast<size_t>(j)];
      const float* row = dp.data() + (o * kRatio + j) * c;
      for (int64_t ch = 0; ch < c; ++ch) out[ch] += row[ch] * f;
    }
  }
  return y;
}

// A same-length convolution of x [n, c] (pad dilation (k - 1) / 2).
T::Tensor conv(const Conv& cv, const T::Tensor& x) {
  return netops::conv1d(x, cv.w, cv.b, 1, cv.dilation * (cv.w.size(2) - 1) / 2, cv.dilation);
}

T::Tensor ampBlock(const AmpBlock& b, T::Tensor x) {
  for (size_t i = 0; i < b.convs1.size(); ++i) {
    const T::Tensor r = conv(b.convs2[i], activate(b.acts[2 * i + 1], conv(b.convs1[i], activate(b.acts[2 * i], x))));
    x = (T::lazy(r) + T::lazy(x)).eval();
  }
  return x;
}

// One stream's latents [n, channels] (denormalized) to samples [n hop].
T::Tensor decodeStream(const Weights& w, const T::Tensor& z) {
  T::Tensor x = conv(w.pre, netops::affine(z, w.inW, w.inB));
  for (const Stage& s : w.stages) {
    x = netops::convTranspose1d(x, s.up.w, s.up.b, s.rate, (s.up.w.size(2) - s.rate) / 2);
    T::Tensor sum = ampBlock(s.blocks[0], x);
    for (size_t j = 1; j < s.blocks.size(); ++j) sum = (T::lazy(sum) + T::lazy(ampBlock(s.blocks[j], x))).eval();
    x = (T::lazy(sum) / T::Lazy(static_cast<double>(s.blocks.size()))).eval();
  }
  const T::Tensor y = conv(w.post, activate(w.postAct, x));
  return T::lazy(y).max(-1.0).min(1.0).eval().reshape({-1});
}

}  // namespace

H3AudioDecoder H3AudioDecoder::load(const std::string& path, const H3AudioConfig& config) {
  Reader r(path);
  auto w = std::make_shared<Weights>();
  w->config = config;
  const T::Shape in = r.shapeOf("dec_in_proj.weight");
  if (in.size() != 3 || in[0] < 1 || in[1] < 1 || in[2] != 1)
    r.fail("dec_in_proj.weight", "has shape " + T::shapeText(in) + ", expected [latent dim, channels, 1]");
  w->channels = in[1];
  w->inW = r.take("dec_in_proj.weight", in).reshape({in[0], in[1]});
  w->inB = r.take("dec_in_proj.bias", {in[0]});
  int64_t width = r.convShape("decoder.conv_pre")[0];
  w->pre = r.conv("decoder.conv_pre", {width, in[0], 7}, width);
  int64_t stages = 0, blocks = 0;
  while (r.hasConv("decoder.ups." + std::to_string(stages) + ".0")) ++stages;
  while (r.hasConv("decoder.resblocks." + std::to_string(blocks) + ".convs1.0")) ++blocks;
  if (stages == 0) r.convShape("decoder.ups.0.0");  // names the missing tensor
  if (blocks == 0 || blocks % stages != 0)
    r.fail("decoder.resblocks." + std::to_string(blocks) + ".convs1.0.weight_v",
           "is missing: " + std::to_string(blocks) + " AMP blocks do not make a whole number a stage for " +
               std::to_string(stages) + " stages");
  const int64_t perStage = blocks / stages;
  for (int64_t i = 0; i < stages; ++i) {
    Stage& s = w->stages.emplace_back();
    const std::string up = "decoder.ups." + std::to_string(i) + ".0";
    const T::Shape us = r.convShape(up);
    if (us[0] != width) r.fail(up + ".weight_v", "has shape " + T::shapeText(us) + ", expected [" + std::to_string(width) + ", out, k]");
    s.up = r.conv(up, us, us[1]);  // transposed: [in, out, k]
    s.rate = (us[2] + 1) / 2;  // kernel 2 u (even u) or 2 u - 1 (odd u)
    width = us[1];
    w->hop *= s.rate;
    for (int64_t j = 0; j < perStage; ++j) {
      const std::string name = "decoder.resblocks." + std::to_string(i * perStage + j);
      const int64_t k = r.convShape(name + ".convs1.0")[2];
      AmpBlock& b = s.blocks.emplace_back();
      for (size_t d = 0; d < config.dilations.size(); ++d) {
        b.convs1.push_back(r.conv(name + ".convs1." + std::to_string(d), {width, width, k}, width, config.dilations[d]));
        b.convs2.push_back(r.conv(name + ".convs2." + std::to_string(d), {width, width, k}, width));
        for (size_t a = 2 * d; a < 2 * d + 2; ++a) b.acts.push_back(r.activation(name + ".activations." + std::to_string(a), width));
      }
    }
  }
  w->postAct = r.activation("decoder.activation_post", width);
  w->post = r.conv("decoder.conv_post", {1, width, 7}, 0);
  w->mean = config.latentsMean;
  w->std = config.latentsStd;
  if (r.has("latents_mean")) w->mean = r.values("latents_mean", {w->channels});
  if (r.has("latents_std")) w->std = r.values("latents_std", {w->channels});
  if (w->mean.size() != static_cast<size_t>(w->channels) || w->std.size() != static_cast<size_t>(w->channels))
    throw Error(path + ": no latents_mean and latents_std of " + std::to_string(w->channels) +
                " channels, in the file or in H3AudioConfig (diffusers keeps them in the VAE's config.json)");
  if (config.dilations.empty() || config.sampleRate < 1)
    throw Error("H3AudioDecoder::load: the config needs dilations and a positive sample rate");
  r.requireAllTaken("decoder.");
  H3AudioDecoder d;
  d.weights_ = std::move(w);
  return d;
}

int64_t H3AudioDecoder::latentChannels() const { return weights_->channels; }
int64_t H3AudioDecoder::hop() const { return weights_->hop; }
int64_t H3AudioDecoder::sampleRate() const { return weights_->config.sampleRate; }

T::Tensor H3AudioDecoder::decode(const T::Tensor& latents) const {
  const Weights& w = *weights_;
  if (latents.ndim() != 3 || latents.size(0) < 1 || latents.size(1) != w.channels || latents.size(2) < 1)
    throw Error("H3AudioDecoder::decode: latents of shape " + T::shapeText(latents.shape()) + " are not [streams, " +
                std::to_string(w.channels) + ", n]");
  if (!isFloat(latents.dtype()))
    throw Error(std::string("H3AudioDecoder::decode: latents are ") + dtypeName(latents.dtype()) +
                ", not a float dtype");
  const T::Tensor z = h3Denormalized(latents, w.mean, w.std);
  std::vector<T::Tensor> streams;
  for (int64_t s = 0; s < z.size(0); ++s) streams.push_back(decodeStream(w, z.slice(0, s, s + 1).squeeze(0).transpose(0, 1).contiguous()));
  return T::stack(streams, 0);
}

}  // namespace gizml::diffusion
