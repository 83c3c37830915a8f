// image::writeVideo's MP4 read back through FFmpeg's libavformat and libavcodec: its streams,
// frame count, size, duration, pixels within the codec's loss (PSNR) and sound (SNR). In a build
// without FFmpeg's libraries, the PNG frames and WAV file it writes instead.
// tests/reference/check_video.py reads the same file with PyAV (ctest image_pyav_reads_mp4).
#include <gizml/image.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "common/psnr.h"
#include "formats/file_bytes.h"
#include "image/video_clip.h"

#if GIZML_HAVE_FFMPEG
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
}
#endif

using namespace gizml;
using namespace gizml::image;
namespace fs = std::filesystem;

#if GIZML_HAVE_FFMPEG
namespace {

// What an MP4 file holds, decoded: its pictures as RGB, its sound as planar f32.
struct Decoded {
  AVCodecID video = AV_CODEC_ID_NONE, audio = AV_CODEC_ID_NONE;
  int width = 0, height = 0, sampleRate = 0, channels = 0;
  AVRational frameRate{0, 1};
  double seconds = 0;
  std::vector<Image> frames;
  std::vector<std::vector<float>> sound;  // per channel
};

void expectOk(int code, const char* what) { ASSERT_GE(code, 0) << what; }

// Decoded pictures to RGB24 as their stream says they were made (matrix and range).
Image toRgb(const AVFrame* frame) {
  SwsContext* sws = sws_getContext(frame->width, frame->height, AVPixelFormat(frame->format), frame->width,
                                   frame->height, AV_PIX_FMT_RGB24, SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT,
                                   nullptr, nullptr, nullptr);
  const int* matrix = sws_getCoefficients(frame->colorspace == AVCOL_SPC_BT709 ? SWS_CS_ITU709 : SWS_CS_ITU601);
  sws_setColorspaceDetails(sws, matrix, frame->color_range == AVCOL_RANGE_JPEG, matrix, 1, 0, 1 << 16, 1 << 16);
  // Into a padded frame: libswscale's SIMD writes past a row's end.
  AVFrame* rgb = av_frame_alloc();
  rgb->format = AV_PIX_FMT_RGB24;
  rgb->width = frame->width;
  rgb->height = frame->height;
  av_frame_get_buffer(rgb, 0);
  sws_scale(sws, frame->data, frame->linesize, 0, frame->height, rgb->data, rgb->linesize);
  Image image{frame->width, frame->height, std::vector<uint8_t>(size_t(frame->width * frame->height * 3))};
  av_image_copy_plane(image.pixels.data(), frame->width * 3, rgb->data[0], rgb->linesize[0], frame->width * 3,
                      frame->height);
  av_frame_free(&rgb);
  sws_freeContext(sws);
  return image;
}

void decodeFile(const std::string& path, Decoded& out) {
  AVFormatContext* file = nullptr;
  expectOk(avformat_open_input(&file, path.c_str(), nullptr, nullptr), "open");
  expectOk(avformat_find_stream_info(file, nullptr), "stream info");
  out.seconds = double(file->duration) / AV_TIME_BASE;
  std::vector<AVCodecContext*> decoders(file->nb_streams, nullptr);
  for (unsigned i = 0; i < file->nb_streams; ++i) {
    const AVCodecParameters* p = file->streams[i]->codecpar;
    if (p->codec_type == AVMEDIA_TYPE_VIDEO) {
      out.video = p->codec_id;
      out.width = p->width;
      out.height = p->height;
      out.frameRate = file->streams[i]->avg_frame_rate;
    } else if (p->codec_type == AVMEDIA_TYPE_AUDIO) {
      out.audio = p->codec_id;
      out.sampleRate = p->sample_rate;
      out.channels = p->ch_layout.nb_channels;
      out.sound.resize(size_t(out.channels));
    }
    decoders[i] = avcodec_alloc_context3(avcodec_find_decoder(p->codec_id));
    avcodec_parameters_to_context(decoders[i], p);
    expectOk(avcodec_open2(decoders[i], nullptr, nullptr), "decoder");
  }
  AVPacket* packet = av_packet_alloc();
  AVFrame* frame = av_frame_alloc();
  auto drain = [&](AVCodecContext* decoder) {
    while (avcodec_receive_frame(decoder, frame) >= 0) {
      if (decoder->codec_type == AVMEDIA_TYPE_VIDEO) {
        out.frames.push_back(toRgb(frame));
      } else {
        ASSERT_EQ(frame->format, AV_SAMPLE_FMT_FLTP);
        for (int c = 0; c < out.channels; ++c) {
          const auto* plane = reinterpret_cast<const float*>(frame->extended_data[c]);
          out.sound[size_t(c)].insert(out.sound[size_t(c)].end(), plane, plane + frame->nb_samples);
        }
      }
    }
  };
  while (av_read_frame(file, packet) >= 0) {
    AVCodecContext* decoder = decoders[size_t(packet->stream_index)];
    expectOk(avcodec_send_packet(decoder, packet), "send packet");
    av_packet_unref(packet);
    drain(decoder);
  }
  for (AVCodecContext* decoder : decoders) {
    avcodec_send_packet(decoder, nullptr);
    drain(decoder);
    avcodec_free_context(&decoder);
  }
  av_frame_free(&frame);
  av_packet_free(&packet);
  avformat_close_input(&file);
}

// The signal-to-noise ratio of the decoded channel, `shift` samples later, against the one
// written (interleaved), over the samples both have.
double snr(const std::vector<float>& decoded, const Audio& audio, int channel, int shift = 0) {
  double signal = 0, noise = 0;
  const int64_t frames = int64_t(audio.samples.size()) / audio.channels;
  for (int64_t i = std::max(0, -shift); i < frames && i + shift < int64_t(decoded.size()); ++i) {
    const double x = audio.samples[size_t(i * audio.channels + channel)];
    const double y = decoded[size_t(i + shift)];
    signal += x * x;
    noise += (y - x) * (y - x);
  }
  return 10 * std::log10(signal / noise);
}

}  // namespace

TEST(Mp4, ReadsBackThroughLibav) {
  fs::create_directories(video_clip::outputPath(""));
  const std::string path = video_clip::outputPath("clip.mp4");  // for ctest image_pyav_reads_mp4 too
  const std::vector<Image> frames = video_clip::frames();
  const Audio sound = video_clip::sound();
  EXPECT_EQ(writeVideo(path, frames, video_clip::kFps, sound), std::vector<std::string>{path});
  // Debian's libavcodec has libx264.
  EXPECT_EQ(videoWriter(), "MP4 (H.264 by libx264, AAC) through FFmpeg's libraries");

  Decoded clip;
  ASSERT_NO_FATAL_FAILURE(decodeFile(path, clip));
  EXPECT_EQ(clip.video, AV_CODEC_ID_H264);
  EXPECT_EQ(clip.width, video_clip::kWidth);
  EXPECT_EQ(clip.height, video_clip::kHeight);
  EXPECT_EQ(clip.frameRate.num, video_clip::kFps);
  EXPECT_EQ(clip.frameRate.den, 1);
  EXPECT_NEAR(clip.seconds, 1.0, 0.03);  // AAC's last frame of 1024 samples may reach past 1 s
  ASSERT_EQ(clip.frames.size(), frames.size());
  for (size_t i = 0; i < frames.size(); ++i) EXPECT_GT(test::psnr(clip.frames[i], frames[i]), 35.0) << "frame " << i;

  EXPECT_EQ(clip.audio, AV_CODEC_ID_AAC);
  EXPECT_EQ(clip.sampleRate, video_clip::kRate);
  ASSERT_EQ(clip.channels, 2);
  // The decoder drops AAC's priming samples as the file's edit list says, so the sound is in
  // place: a sample early or late is further from it. It decodes the last AAC frame whole (1024
  // samples), past the 48000 written. AAC is lossy, most at the start: about 28 dB here.
  EXPECT_GE(clip.sound[0].size(), size_t(video_clip::kRate));
  EXPECT_LT(clip.sound[0].size(), size_t(video_clip::kRate + 1024));
  for (int c = 0; c < 2; ++c) {
    const double inPlace = snr(clip.sound[size_t(c)], sound, c);
    EXPECT_GT(inPlace, 25.0) << "channel " << c;
    EXPECT_GT(inPlace, snr(clip.sound[size_t(c)], sound, c, 1) + 2) << "channel " << c;
    EXPECT_GT(inPlace, snr(clip.sound[size_t(c)], sound, c, -1) + 2) << "channel " << c;
  }

  // The index is before the samples (faststart): "moov" ahead of "mdat".
  const std::vector<uint8_t> bytes = readFileBytes(path);
  const std::string text(bytes.begin(), bytes.end());
  EXPECT_LT(text.find("moov"), text.find("mdat"));
}

TEST(Mp4, FromTensorWithoutSound) {
  const std::string path = video_clip::outputPath("tensor.mp4");
  // Two 6 x 4 frames in [-1, 1]: all black, then all white.
  tensor::Tensor pixels = tensor::full({2, 3, 4, 6}, -1.0);
  tensor::Tensor white = tensor::full({1, 3, 4, 6}, 1.0);
  tensor::assign(pixels.slice(0, 1, 2), white);
  writeVideo(path, pixels, 25, {}, Range::MinusOneOne);
  Decoded clip;
  ASSERT_NO_FATAL_FAILURE(decodeFile(path, clip));
  EXPECT_EQ(clip.audio, AV_CODEC_ID_NONE);
  EXPECT_EQ(clip.width, 6);
  EXPECT_EQ(clip.height, 4);
  ASSERT_EQ(clip.frames.size(), 2u);
  for (uint8_t v : clip.frames[0].pixels) EXPECT_LE(v, 3);
  for (uint8_t v : clip.frames[1].pixels) EXPECT_GE(v, 252);
}

TEST(Mp4, RefusesWhatItCannotWrite) {
  const std::vector<Image> frames = video_clip::frames();
  try {
    writeVideo("/nonexistent-folder/x.mp4", frames, 8);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "image::writeVideo: cannot write /nonexistent-folder/x.mp4: No such file or directory");
  }
  const std::string path = video_clip::outputPath("bad_rate.mp4");
  try {
    writeVideo(path, frames, 8, Audio{std::vector<float>(100), 1, 12345});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("image::writeVideo: AAC has no rate of 12345 Hz (96000, 88200, 64000"),
              std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path));  // not left half written
}

#else

TEST(Mp4, WithoutFfmpegWritesFramesAndWav) {
  const std::string folder = video_clip::outputPath("fallback");
  fs::remove_all(folder);
  fs::create_directories(folder);
  EXPECT_EQ(videoWriter(), "PNG frames and a WAV file (built without FFmpeg's libraries)");
  const std::vector<std::string> files =
      writeVideo(folder + "/clip.mp4", video_clip::frames(), video_clip::kFps, video_clip::sound());
  ASSERT_EQ(files.size(), size_t(video_clip::kFrames) + 1);
  EXPECT_EQ(files.front(), folder + "/clip-0001.png");
  EXPECT_EQ(files.back(), folder + "/clip.wav");
  EXPECT_EQ(decode(readFileBytes(files.front())).pixels, video_clip::frame(0).pixels);
}

#endif
