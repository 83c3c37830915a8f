#pragma once
// The clip the video tests write and read back, and tests/reference/check_video.py and
// check_wav.py recompute: 8 frames of 64 x 48 at 8 frames a second, each a red gradient across, a
// green one down and a blue level of its own; one second of sound at 48 kHz, 440 Hz at half scale
// on the left and at a quarter, inverted, on the right.
#include <gizml/image.h>

#include <cmath>
#include <filesystem>
#include <numbers>
#include <string>
#include <vector>
#include "common/test_paths.h"

namespace video_clip {

inline constexpr int kFrames = 8, kWidth = 64, kHeight = 48, kFps = 8, kRate = 48000;

inline gizml::image::Image frame(int index, int width = kWidth, int height = kHeight) {
  gizml::image::Image image{width, height, std::vector<uint8_t>(size_t(width * height * 3))};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &image.pixels[size_t((y * width + x) * 3)];
      p[0] = uint8_t(x * 255 / (width - 1));
      p[1] = uint8_t(y * 255 / (height - 1));
      p[2] = uint8_t(16 + 30 * index);
    }
  return image;
}

inline std::vector<gizml::image::Image> frames() {
  std::vector<gizml::image::Image> all;
  for (int i = 0; i < kFrames; ++i) all.push_back(frame(i));
  return all;
}

inline gizml::image::Audio sound() {
  gizml::image::Audio audio{{}, 2, kRate};
  for (int n = 0; n < kRate; ++n) {
    const double s = std::sin(2 * std::numbers::pi * 440.0 * n / kRate);
    audio.samples.push_back(float(0.5 * s));
    audio.samples.push_back(float(-0.25 * s));
  }
  return audio;
}

// Where the tests leave their files for the Python checks (ctest image_*_video, image_*_wav).
// The folder is made here: a test run alone (ctest -R) must not rely on another having made it.
inline std::string outputPath(const std::string& name) {
  const std::string folder = test_paths::buildDir() + "/image";
  std::filesystem::create_directories(folder);
  return folder + "/" + name;
}

}  // namespace video_clip
