// image::writeVideo's checks and its two outputs: an MP4 through FFmpeg's libraries (the MP4
// module, mp4_module.cpp), or, in a build without them, PNG frames and a WAV file.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "image/video.h"

namespace gizml::image {
namespace {

void checkFrames(const char* who, std::span<const Image> frames, bool evenSides) {
  check(!frames.empty(), std::string(who) + ": no frames");
  const Image& first = frames.front();
  for (size_t i = 0; i < frames.size(); ++i) {
    const Image& frame = frames[i];
    if (frame.width < 1 || frame.height < 1 || frame.width > kMaxSide || frame.height > kMaxSide ||
        frame.pixels.size() != size_t(frame.width * frame.height * 3))
      throw Error(std::string(who) + ": frame " + std::to_string(i) + " has " + std::to_string(frame.pixels.size()) +
                  " bytes of pixels for " + std::to_string(frame.width) + " x " + std::to_string(frame.height) +
                  " RGB pixels (each side 1 to " + std::to_string(kMaxSide) + ")");
    if (frame.width != first.width || frame.height != first.height)
      throw Error(std::string(who) + ": frame " + std::to_string(i) + " is " + std::to_string(frame.width) + " x " +
                  std::to_string(frame.height) + " pixels, frame 0 " + std::to_string(first.width) + " x " +
                  std::to_string(first.height));
  }
  check(!evenSides || (first.width % 2 == 0 && first.height % 2 == 0),
        std::string(who) + ": the frames are " + std::to_string(first.width) + " x " + std::to_string(first.height) +
            " pixels; yuv420p video needs even sides (gizml neither pads nor crops them)");
}

}  // namespace

void writeFileBytes(const char* who, const std::string& path, std::span<const uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (out) out.close();
  if (!out) throw Error(std::string(who) + ": cannot write " + path + ": " + std::strerror(errno));
}

std::string videoWriter() {
#if GIZML_HAVE_FFMPEG
  return mp4Contents() + " through FFmpeg's libraries";
#else
  return "PNG frames and a WAV file (built without FFmpeg's libraries)";
#endif
}

std::vector<std::string> writeVideo(const std::string& path, std::span<const Image> frames, double fps,
                                    const Audio& audio) {
  // The same checks with or without FFmpeg's libraries, so that a caller's frames do not work in
  // one build and fail in another.
  checkFrames("image::writeVideo", frames, true);
  check(fps > 0 && fps <= 1000,
        "image::writeVideo: " + std::to_string(fps) + " frames a second (above 0, at most 1000)");
  if (!audio.samples.empty()) checkAudio("image::writeVideo", audio);
#if GIZML_HAVE_FFMPEG
  writeMp4(path, frames, fps, audio);
  return {path};
#else
  return writeFrames(path, frames, audio);
#endif
}

std::vector<std::string> writeVideo(const std::string& path, const tensor::Tensor& frames, double fps,
                                    const Audio& audio, Range range) {
  check(frames.ndim() == 4 && frames.size(1) == 3,
        "image::writeVideo: the frames must be [frames, 3, height, width], not " + tensor::shapeText(frames.shape()));
  std::vector<Image> images;
  images.reserve(size_t(frames.size(0)));
  for (int64_t i = 0; i < frames.size(0); ++i)
    images.push_back(fromTensor(frames.slice(0, i, i + 1).squeeze(0), range));
  return writeVideo(path, images, fps, audio);
}

std::vector<std::string> writeFrames(const std::string& path, std::span<const Image> frames, const Audio& audio) {
  checkFrames("image::writeFrames", frames, false);
  if (!audio.samples.empty()) checkAudio("image::writeFrames", audio);
  const std::filesystem::path base = std::filesystem::path(path).replace_extension();
  const size_t digits = std::max<size_t>(4, std::to_string(frames.size()).size());
  std::vector<std::string> written;
  for (size_t i = 0; i < frames.size(); ++i) {
    const std::string number = std::to_string(i + 1);
    written.push_back(base.string() + "-" + std::string(digits - number.size(), '0') + number + ".png");
    writeFileBytes("image::writeFrames", written.back(), encodePng(frames[i]));
  }
  if (!audio.samples.empty()) {
    written.push_back(base.string() + ".wav");
    writeWav(written.back(), audio);
  }
  return written;
}

}  // namespace gizml::image
