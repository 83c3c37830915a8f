// H3Text and H3Pipeline: MiniMax H3's text to video with sound as diffusers' modular pipeline runs
// it (modular_pipelines/minimax_h3: MiniMaxH3TextEncoderStep, MiniMaxH3PrepareLayoutStep,
// MiniMaxH3PrepareLatentsStep, the denoise loop, the decoders' steps).
#include <gizml/diffusion.h>
#include <gizml/error.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "pipeline_stages.h"

namespace gizml::diffusion {

struct H3Text::Parts {
  llm::Model model;
  int64_t layer;
};

H3Text H3Text::load(const std::string& folder, int64_t layer) {
  check(layer >= 1, "H3Text::load: hidden state " + std::to_string(layer) + " is not after a layer (1 or more)");
  H3Text out;
  out.parts_ = std::make_shared<const Parts>(Parts{llm::load(folder, {.layers = layer}), layer});
  return out;
}

std::vector<llm::TokenId> H3Text::promptTokens(const std::string& prompt) const {
  return parts_->model.tokenizer().encode(prompt, false);
}

H3Condition H3Text::condition(const std::string& prompt) const {
  const std::vector<llm::TokenId> ids = promptTokens(prompt);
  check(!ids.empty(), "H3Text::condition: an empty prompt");
  const auto tokens = static_cast<int64_t>(ids.size());
  const int64_t context = parts_->model.contextLength();
  check(tokens <= context, "H3Text::condition: the prompt's " + std::to_string(tokens) +
                               " tokens exceed the text encoder's " + std::to_string(context));
  H3Condition out;
  out.text = parts_->model.engine(1, tokens).hidden(ids, {parts_->layer}).host();
  return out;
}

int64_t H3Text::width() const { return parts_->model.hiddenSize(); }

struct H3Pipeline::Parts {
  H3Model model;
  H3VideoDecoder video;
  H3AudioDecoder audio;
  H3Text text;
  H3PipelineConfig config;
};

namespace {

// H3 packs video latents in 1 x 2 x 2 patches, so a latent side is a whole number of patches.
constexpr int64_t kSpatialPatch = 2;
// Its sound is stereo, the two channels packed one after the other.
constexpr int64_t kAudioStreams = 2;

// A number as the errors print it: 24, 5.17, 15.
std::string shortNumber(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", v);
  return text;
}

// What layout and load read from the config, checked.
void checkConfig(const H3PipelineConfig& c) {
  check(c.steps >= 1 && c.steps <= 1000, "H3Pipeline: " + std::to_string(c.steps) + " steps are outside 1 to 1000");
  check(c.fps > 0 && c.fps <= 1000, "H3Pipeline: fps " + shortNumber(c.fps) + " is outside (0, 1000]");
  check(c.audioLatentsPerSecond >= 1 && c.audioLatentsPerSecond <= 100000,
        "H3Pipeline: audioLatentsPerSecond " + std::to_string(c.audioLatentsPerSecond) + " is outside 1 to 100000");
  check(c.minSeconds >= 0 && c.maxSeconds >= c.minSeconds && c.maxSeconds <= 3600,
        "H3Pipeline: the seconds " + shortNumber(c.minSeconds) + " to " + shortNumber(c.maxSeconds) +
            " are not a range within an hour");
  check(c.canvasShortEdge >= 1 && c.canvasMaxPixels >= 1, "H3Pipeline: an empty default canvas");
  const H3VideoConfig& v = c.video;
  check(v.patch >= 1 && v.patchT >= 1 && v.clipLength >= 1 && (v.clipLength + v.patchT - 1) / v.patchT < v.clipLength,
        "H3Pipeline: the video decoder's patch " + std::to_string(v.patch) + ", time patch " +
            std::to_string(v.patchT) + " and clip of " + std::to_string(v.clipLength) +
            " frames make no frame count (clip n + latents a clip keeps)");
}

}  // namespace

H3Pipeline H3Pipeline::load(const std::string& model, const std::string& videoDecoder,
                            const std::string& audioDecoder, const std::string& textFolder,
                            const H3PipelineConfig& config) {
  checkConfig(config);
  H3Model h3 = H3Model::load(model);
  H3VideoDecoder video = H3VideoDecoder::load(videoDecoder, config.video);
  H3AudioDecoder audio = H3AudioDecoder::load(audioDecoder, config.audio);
  H3Text text = H3Text::load(textFolder, config.textLayer);
  check(text.width() == h3.textDim(), textFolder + ": the text encoder's states are " + std::to_string(text.width()) +
                                          " wide, and " + model + " reads text " + std::to_string(h3.textDim()) +
                                          " wide");
  check(video.latentChannels() == h3.videoChannels(),
        videoDecoder + ": decodes " + std::to_string(video.latentChannels()) + " latent channels, and " + model +
            " makes " + std::to_string(h3.videoChannels()));
  check(audio.latentChannels() == h3.audioChannels(),
        audioDecoder + ": decodes " + std::to_string(audio.latentChannels()) + " latent channels, and " + model +
            " makes " + std::to_string(h3.audioChannels()));
  h3.prepare(config.steps, config.shift);
  if (config.gpu) h3 = h3.to(*config.gpu);
  H3Pipeline out;
  out.parts_ = std::make_shared<const Parts>(
      Parts{std::move(h3), std::move(video), std::move(audio), std::move(text), config});
  return out;
}

int64_t H3Pipeline::sizeMultiple(const H3PipelineConfig& config) { return config.video.patch * kSpatialPatch; }
int64_t H3Pipeline::sizeMultiple() const { return sizeMultiple(parts_->config); }

std::pair<int64_t, int64_t> H3Pipeline::defaultSize(const H3PipelineConfig& c) {
  // resolve_canvas_size(16, 9, ...): the short edge, the area capped, each side rounded.
  double width = static_cast<double>(c.canvasShortEdge) * 16.0 / 9.0, height = static_cast<double>(c.canvasShortEdge);
  if (width * height > static_cast<double>(c.canvasMaxPixels)) {
    const double s = std::sqrt(static_cast<double>(c.canvasMaxPixels) / (width * height));
    width *= s;
    height *= s;
  }
  const int64_t m = sizeMultiple(c);
  // Python's round: halves to even.
  const auto rounded = [m](double side) {
    return std::max(m, static_cast<int64_t>(std::nearbyint(side / static_cast<double>(m))) * m);
  };
  return {rounded(width), rounded(height)};
}
std::pair<int64_t, int64_t> H3Pipeline::defaultSize() const { return defaultSize(parts_->config); }

H3Layout H3Pipeline::layout(const H3PipelineConfig& c, int64_t frames, int64_t width, int64_t height) {
  checkConfig(c);
  check(frames >= 1 && frames <= 1000000, "H3Pipeline: " + std::to_string(frames) + " frames");
  if (width == 0 && height == 0) std::tie(width, height) = defaultSize(c);
  checkSize("H3Pipeline", sizeMultiple(c), width, height);
  // What image::writeVideo's frames can be (and what keeps the sizes below from overflowing).
  check(width <= image::kMaxSide && height <= image::kMaxSide,
        "H3Pipeline: the size " + std::to_string(width) + " x " + std::to_string(height) + " has a side over " +
            std::to_string(image::kMaxSide));
  // align_num_frames: up to the next clip n + latents a clip keeps (17 n + 5).
  const H3VideoConfig& v = c.video;
  const int64_t perClip = (v.clipLength + v.patchT - 1) / v.patchT;
  const int64_t aligned = frames + ((perClip - frames) % v.clipLength + v.clipLength) % v.clipLength;
  const double seconds = static_cast<double>(aligned) / c.fps;
  check(seconds >= c.minSeconds && seconds <= c.maxSeconds,
        "H3Pipeline: " + std::to_string(frames) + " frames (" + std::to_string(aligned) + " once rounded up to " +
            std::to_string(v.clipLength) + " n + " + std::to_string(perClip) + ") are " + shortNumber(seconds) +
            " s at " + shortNumber(c.fps) + " fps; the model makes " + shortNumber(c.minSeconds) + " to " +
            shortNumber(c.maxSeconds) + " s");
  H3Layout out{.frames = aligned, .width = width, .height = height};
  out.latentFrames = (aligned - perClip) / v.clipLength * perClip + 2;  // video_latent_num_frames' 5 n + 2
  out.latentHeight = height / v.patch;
  out.latentWidth = width / v.patch;
  // audio_latent_num_frames: Python's round of frames / fps x latents a second.
  out.audioLatents = static_cast<int64_t>(std::nearbyint(seconds * static_cast<double>(c.audioLatentsPerSecond)));
  return out;
}

H3Layout H3Pipeline::layout(int64_t frames, int64_t width, int64_t height) const {
  return layout(parts_->config, frames, width, height);
}

H3Condition H3Pipeline::condition(const std::string& prompt) const { return parts_->text.condition(prompt); }

H3Latents H3Pipeline::noise(uint64_t seed, const H3Layout& layout) const {
  // One generator: the video latent first, then the audio rows, as MiniMaxH3PrepareLatentsStep.
  TorchGenerator generator(seed);
  const int64_t channels = parts_->model.videoChannels();
  H3Latents out;
  out.video = generator.randn({1, channels, layout.latentFrames, layout.latentHeight, layout.latentWidth})
                  .reshape({channels, layout.latentFrames, layout.latentHeight, layout.latentWidth});
  out.audio = generator.randn({kAudioStreams, layout.audioLatents, parts_->model.audioChannels()});
  if (const auto& gpu = parts_->config.gpu) out = {out.video.on(*gpu), out.audio.on(*gpu)};
  return out;
}

H3Latents H3Pipeline::sample(const H3Latents& noise, const H3Condition& condition,
                             const std::function<void(int64_t, const H3Latents&)>& onStep) const {
  return parts_->model.sample(noise, condition, onStep);
}

H3Video H3Pipeline::decode(const H3Latents& latents, H3Times* times) const {
  H3Times local;
  H3Times& t = times ? *times : local;
  H3Video out;
  out.fps = parts_->config.fps;
  out.sampleRate = parts_->audio.sampleRate();
  const tensor::Shape& v = latents.video.shape();
  check(v.size() == 4, "H3Pipeline::decode: video latents " + tensor::shapeText(v) + " are not [channels, f, h, w]");
  out.frames = timed(t.video, [&] {
    return parts_->video.decode(latents.video.host().reshape({1, v[0], v[1], v[2], v[3]}));
  });
  // The audio rows [streams, n, channels] as the decoder reads them: [streams, channels, n].
  out.sound = timed(t.audio, [&] { return parts_->audio.decode(latents.audio.host().permute({0, 2, 1}).contiguous()); });
  return out;
}

H3Video H3Pipeline::generate(const std::string& prompt, uint64_t seed, const H3Layout& layout,
                             const std::function<void(int64_t, const H3Latents&)>& onStep, H3Times* times) const {
  H3Times local;
  H3Times& t = times ? *times : local;
  const H3Condition c = timed(t.text, [&] { return condition(prompt); });
  const H3Latents x = timed(t.sample, [&] { return sample(noise(seed, layout), c, onStep); });
  return decode(x, &t);
}

const H3PipelineConfig& H3Pipeline::config() const { return parts_->config; }
const H3Model& H3Pipeline::model() const { return parts_->model; }

}  // namespace gizml::diffusion
