// MP4 files through FFmpeg's libraries (libavcodec's encoders, libavformat's muxer, libswscale's
// RGB to YUV): H.264 by libx264, or libavcodec's own MPEG-4 Part 2 where it lacks libx264, and
// AAC by libavcodec's own encoder. docs/architecture.md, "Dependencies", says why.
//
// Built as its own module (libgizml_mp4.so), which image::writeVideo loads at its first video
// (mp4_module.cpp): linked into every program, FFmpeg's libraries and the 100 they need came to
// 18 MiB of resident memory at the start of each (`giz --version`: 30 MiB against 11).
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

#include <algorithm>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>

#include "image/mp4_module.h"
#include "image/video.h"

namespace gizml::image {
namespace {

constexpr const char* kWho = "image::writeVideo";
constexpr const char* kCrf = "18";  // x264's "visually lossless" end of its quality scale
constexpr int kMpeg4Quantizer = 2;  // the best quality MPEG-4 Part 2 encoders offer short of 1
constexpr int64_t kAudioBitsPerChannel = 128000;
constexpr int kMaxTimeBase = 65535;  // MPEG-4 Part 2 keeps its time base's denominator in 16 bits

std::string avError(int code) {
  char text[AV_ERROR_MAX_STRING_SIZE] = "";
  av_strerror(code, text, sizeof text);
  return text;
}

void checkAv(int code, const std::string& what) {
  if (code < 0) throw Error(std::string(kWho) + ": " + what + ": " + avError(code));
}

struct FreeCodec {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FreeFrame {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct FreePacket {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct FreeScaler {
  void operator()(SwsContext* s) const { sws_freeContext(s); }
};
struct CloseOutput {
  void operator()(AVFormatContext* f) const {
    avio_closep(&f->pb);
    avformat_free_context(f);
  }
};
using Codec = std::unique_ptr<AVCodecContext, FreeCodec>;
using Frame = std::unique_ptr<AVFrame, FreeFrame>;

const AVCodec* videoEncoder() {
  const AVCodec* x264 = avcodec_find_encoder_by_name("libx264");
  return x264 != nullptr ? x264 : avcodec_find_encoder(AV_CODEC_ID_MPEG4);
}

// An encoder and its stream in the file; send(nullptr) drains it at the end.
struct Track {
  AVFormatContext* file;
  Codec codec;
  AVStream* stream;
  AVPacket* packet;

  void send(const AVFrame* frame) {
    checkAv(avcodec_send_frame(codec.get(), frame), std::string("the ") + codec->codec->name + " encoder");
    int code;
    while ((code = avcodec_receive_packet(codec.get(), packet)) >= 0) {
      av_packet_rescale_ts(packet, codec->time_base, stream->time_base);
      packet->stream_index = stream->index;
      checkAv(av_interleaved_write_frame(file, packet), "writing " + std::string(file->url));
    }
    if (code != AVERROR(EAGAIN) && code != AVERROR_EOF)
      checkAv(code, std::string("the ") + codec->codec->name + " encoder");
  }
};

template <class Configure>
Codec openEncoder(const AVCodec* codec, AVFormatContext* file, const std::string& what, Configure configure) {
  check(codec != nullptr, std::string(kWho) + ": libavcodec has no " + what + " encoder");
  Codec context(avcodec_alloc_context3(codec));
  check(context != nullptr, std::string(kWho) + ": out of memory for the " + what + " encoder");
  configure(context.get());
  if (file->oformat->flags & AVFMT_GLOBALHEADER) context->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  checkAv(avcodec_open2(context.get(), codec, nullptr), "the " + std::string(codec->name) + " encoder refused " + what);
  return context;
}

AVStream* addStream(AVFormatContext* file, const AVCodecContext* codec) {
  AVStream* stream = avformat_new_stream(file, nullptr);
  check(stream != nullptr, std::string(kWho) + ": out of memory for a stream");
  checkAv(avcodec_parameters_from_context(stream->codecpar, codec), "the stream's parameters");
  stream->time_base = codec->time_base;
  return stream;
}

struct VideoSettings {
  int width, height;
  AVRational rate;
};

void configureVideo(AVCodecContext* c, const VideoSettings& s) {
  c->width = s.width;
  c->height = s.height;
  c->framerate = s.rate;
  c->time_base = av_inv_q(s.rate);
  c->pix_fmt = AV_PIX_FMT_YUV420P;
  c->color_range = AVCOL_RANGE_MPEG;
  c->colorspace = AVCOL_SPC_BT709;
  c->color_primaries = AVCOL_PRI_BT709;
  c->color_trc = AVCOL_TRC_BT709;
  c->thread_count = 0;  // as many as the encoder finds useful
  if (std::string(c->codec->name) == "libx264") {
    av_opt_set(c->priv_data, "preset", "medium", 0);
    av_opt_set(c->priv_data, "crf", kCrf, 0);
  } else {
    c->flags |= AV_CODEC_FLAG_QSCALE;
    c->global_quality = FF_QP2LAMBDA * kMpeg4Quantizer;
  }
}

void configureAudio(AVCodecContext* c, const Audio& audio) {
  c->sample_fmt = AV_SAMPLE_FMT_FLTP;
  c->sample_rate = audio.sampleRate;
  c->time_base = {1, audio.sampleRate};
  av_channel_layout_default(&c->ch_layout, audio.channels);
  c->bit_rate = kAudioBitsPerChannel * audio.channels;
}

void checkSampleRate(const AVCodec* aac, int rate) {
  if (aac == nullptr || aac->supported_samplerates == nullptr) return;
  std::string rates;
  for (const int* r = aac->supported_samplerates; *r != 0; ++r) {
    if (*r == rate) return;
    rates += (rates.empty() ? "" : ", ") + std::to_string(*r);
  }
  throw Error(std::string(kWho) + ": AAC has no rate of " + std::to_string(rate) + " Hz (" + rates + ")");
}

template <class Shape>
Frame makeFrame(const std::string& what, Shape shape) {
  Frame frame(av_frame_alloc());
  check(frame != nullptr, std::string(kWho) + ": out of memory for " + what);
  shape(frame.get());
  checkAv(av_frame_get_buffer(frame.get(), 0), what);
  return frame;
}

// The picture, RGB to limited-range BT.709 yuv420p with its chroma filtered from every pixel.
// libswscale's SIMD reads past a row's end, so the RGB goes through a padded frame of its own
// (valgrind saw it read 16 bytes at the image's last 12).
void fillPicture(AVFrame* frame, AVFrame* rgb, SwsContext* scaler, const Image& image) {
  const int rowBytes = int(image.width * 3);
  av_image_copy_plane(rgb->data[0], rgb->linesize[0], image.pixels.data(), rowBytes, rowBytes, int(image.height));
  checkAv(av_frame_make_writable(frame), "a video frame");
  sws_scale(scaler, rgb->data, rgb->linesize, 0, int(image.height), frame->data, frame->linesize);
}

// Samples [start, start + count) of the interleaved sound into the planar frame.
void fillSound(AVFrame* frame, const Audio& audio, int64_t start, int count) {
  checkAv(av_frame_make_writable(frame), "an audio frame");
  frame->nb_samples = count;
  frame->pts = start;
  for (int c = 0; c < audio.channels; ++c) {
    auto* plane = reinterpret_cast<float*>(frame->extended_data[c]);
    for (int i = 0; i < count; ++i) plane[i] = audio.samples[size_t((start + i) * audio.channels + c)];
  }
}

void quietFfmpeg() {
  // Errors still reach stderr; x264's statistics and the muxer's notes do not.
  static std::once_flag once;
  std::call_once(once, [] {
    if (av_log_get_level() == AV_LOG_INFO) av_log_set_level(AV_LOG_ERROR);
  });
}

void encode(AVFormatContext* file, std::span<const Image> frames, double fps, const Audio& audio) {
  std::unique_ptr<AVPacket, FreePacket> packet(av_packet_alloc());
  check(packet != nullptr, std::string(kWho) + ": out of memory for a packet");
  const VideoSettings settings{int(frames[0].width), int(frames[0].height), av_d2q(fps, kMaxTimeBase)};
  Codec videoCodec =
      openEncoder(videoEncoder(), file, "the video", [&](AVCodecContext* c) { configureVideo(c, settings); });
  AVStream* videoStream = addStream(file, videoCodec.get());
  Track video{file, std::move(videoCodec), videoStream, packet.get()};
  video.stream->avg_frame_rate = settings.rate;
  std::optional<Track> sound;
  if (!audio.samples.empty()) {
    const AVCodec* aac = avcodec_find_encoder(AV_CODEC_ID_AAC);
    checkSampleRate(aac, audio.sampleRate);
    Codec audioCodec = openEncoder(aac, file, "the sound", [&](AVCodecContext* c) { configureAudio(c, audio); });
    AVStream* audioStream = addStream(file, audioCodec.get());
    sound.emplace(Track{file, std::move(audioCodec), audioStream, packet.get()});
  }

  AVDictionary* options = nullptr;
  av_dict_set(&options, "movflags", "+faststart", 0);
  const int header = avformat_write_header(file, &options);
  av_dict_free(&options);
  checkAv(header, "writing " + std::string(file->url));

  std::unique_ptr<SwsContext, FreeScaler> scaler(sws_getContext(
      settings.width, settings.height, AV_PIX_FMT_RGB24, settings.width, settings.height, AV_PIX_FMT_YUV420P,
      SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INP, nullptr, nullptr, nullptr));
  check(scaler != nullptr, std::string(kWho) + ": libswscale has no RGB to yuv420p conversion");
  const int* bt709 = sws_getCoefficients(SWS_CS_ITU709);
  sws_setColorspaceDetails(scaler.get(), bt709, 1, bt709, 0, 0, 1 << 16, 1 << 16);
  const Frame picture = makeFrame("a video frame", [&](AVFrame* f) {
    f->format = video.codec->pix_fmt;
    f->width = settings.width;
    f->height = settings.height;
  });
  const Frame rgb = makeFrame("an RGB frame", [&](AVFrame* f) {
    f->format = AV_PIX_FMT_RGB24;
    f->width = settings.width;
    f->height = settings.height;
  });
  Frame chunk;
  int64_t written = 0, total = 0;
  int chunkSize = 0;
  if (sound) {
    const AVCodecContext* c = sound->codec.get();
    chunk = makeFrame("an audio frame", [&](AVFrame* f) {
      f->format = c->sample_fmt;
      f->sample_rate = c->sample_rate;
      f->nb_samples = c->frame_size;
      av_channel_layout_copy(&f->ch_layout, &c->ch_layout);
    });
    total = int64_t(audio.samples.size()) / audio.channels;
    chunkSize = c->frame_size;
  }
  // Every whole chunk of sound up to `until` (the sound's end: also the last, shorter one).
  auto sendSound = [&](int64_t until) {
    while (written < total && (until - written >= chunkSize || until == total)) {
      const int count = int(std::min<int64_t>(chunkSize, total - written));
      fillSound(chunk.get(), audio, written, count);
      sound->send(chunk.get());
      written += count;
    }
  };
  for (size_t i = 0; i < frames.size(); ++i) {
    fillPicture(picture.get(), rgb.get(), scaler.get(), frames[i]);
    picture->pts = int64_t(i);
    video.send(picture.get());
    // The sound as far as the end of this frame, so that the muxer interleaves as it goes.
    if (sound) sendSound(std::min(total, av_rescale_q(int64_t(i + 1), video.codec->time_base, {1, audio.sampleRate})));
  }
  video.send(nullptr);
  if (sound) {
    sendSound(total);
    sound->send(nullptr);
  }
  checkAv(av_write_trailer(file), "finishing " + std::string(file->url));
}

std::string contents() {
  const AVCodec* codec = videoEncoder();
  return codec != nullptr && std::string(codec->name) == "libx264" ? "MP4 (H.264 by libx264, AAC)"
                                                                   : "MP4 (MPEG-4 Part 2 by libavcodec, AAC)";
}

void write(const std::string& path, std::span<const Image> frames, double fps, const Audio& audio) {
  quietFfmpeg();
  AVFormatContext* raw = nullptr;
  checkAv(avformat_alloc_output_context2(&raw, nullptr, "mp4", path.c_str()), "libavformat's MP4 writer");
  std::unique_ptr<AVFormatContext, CloseOutput> file(raw);
  checkAv(avio_open(&file->pb, path.c_str(), AVIO_FLAG_WRITE), "cannot write " + path);
  try {
    encode(file.get(), frames, fps, audio);
  } catch (...) {
    file.reset();
    std::error_code ignored;
    std::filesystem::remove(path, ignored);  // not a file that looks whole and is not
    throw;
  }
}

}  // namespace

// The module's entry points (mp4_module.h): no exception crosses into the program.
extern "C" __attribute__((visibility("default"))) bool gizml_mp4_write(const std::string& path,
                                                                      std::span<const Image> frames, double fps,
                                                                      const Audio& audio, std::string& error) noexcept {
  try {
    write(path, frames, fps, audio);
    return true;
  } catch (const std::exception& e) {
    error = e.what();
    return false;
  }
}

extern "C" __attribute__((visibility("default"))) bool gizml_mp4_contents(std::string& contents,
                                                                         std::string& error) noexcept {
  try {
    contents = gizml::image::contents();
    return true;
  } catch (const std::exception& e) {
    error = e.what();
    return false;
  }
}

static_assert(std::is_same_v<decltype(gizml_mp4_write), Mp4Write> &&
              std::is_same_v<decltype(gizml_mp4_contents), Mp4Contents>);

}  // namespace gizml::image
