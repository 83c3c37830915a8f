// image::writeWav, writeFrames and writeVideo's checks, in every build (with or without FFmpeg's
// libraries); mp4_test.cpp reads the MP4 back. tests/reference/check_wav.py reads the WAV with
// Python's wave module (ctest image_wave_reads_wav).
#include <gizml/image.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "formats/file_bytes.h"
#include "image/video_clip.h"

using namespace gizml;
using namespace gizml::image;
namespace fs = std::filesystem;

namespace {

uint32_t le32(const std::vector<uint8_t>& b, size_t at) {
  return b[at] | b[at + 1] << 8 | b[at + 2] << 16 | uint32_t(b[at + 3]) << 24;
}
int16_t sample16(const std::vector<uint8_t>& b, size_t index) {
  return int16_t(uint16_t(b[44 + 2 * index] | b[45 + 2 * index] << 8));
}

template <class F>
void expectError(F&& write, const std::string& expected) {
  try {
    write();
    ADD_FAILURE() << "no error; expected one containing: " << expected;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

std::string freshFolder(const std::string& name) {
  const std::string folder = video_clip::outputPath(name);
  fs::remove_all(folder);
  fs::create_directories(folder);
  return folder;
}

}  // namespace

TEST(Video, WritesWav) {
  fs::create_directories(video_clip::outputPath(""));
  const std::string path = video_clip::outputPath("clip.wav");
  const Audio sound = video_clip::sound();
  writeWav(path, sound);  // for ctest image_wave_reads_wav too
  const std::vector<uint8_t> bytes = readFileBytes(path);
  ASSERT_EQ(bytes.size(), 44 + sound.samples.size() * 2);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 4), "RIFF");
  EXPECT_EQ(le32(bytes, 4), bytes.size() - 8);
  EXPECT_EQ(std::string(bytes.begin() + 8, bytes.begin() + 16), "WAVEfmt ");
  EXPECT_EQ(le32(bytes, 20) & 0xffff, 1u);  // PCM
  EXPECT_EQ(le32(bytes, 20) >> 16, 2u);     // channels
  EXPECT_EQ(le32(bytes, 24), 48000u);
  EXPECT_EQ(le32(bytes, 28), 48000u * 4);
  EXPECT_EQ(le32(bytes, 32), 4u | 16u << 16);  // 4 bytes a frame, 16 bits a sample
  EXPECT_EQ(std::string(bytes.begin() + 36, bytes.begin() + 40), "data");
  EXPECT_EQ(le32(bytes, 40), sound.samples.size() * 2);
  for (size_t i : {size_t(0), size_t(1), size_t(2), size_t(3), size_t(219), size_t(95999)})
    EXPECT_EQ(sample16(bytes, i), std::lrint(sound.samples[i] * 32767.0f)) << i;

  // Clamped, rounded half to even, NaN as 0.
  writeWav(path + ".edge", Audio{{2.0f, -2.0f, std::numeric_limits<float>::quiet_NaN(), 0.5f, -0.5f}, 1, 8000});
  const std::vector<uint8_t> edge = readFileBytes(path + ".edge");
  ASSERT_EQ(edge.size(), 44u + 10);
  EXPECT_EQ(sample16(edge, 0), 32767);
  EXPECT_EQ(sample16(edge, 1), -32767);
  EXPECT_EQ(sample16(edge, 2), 0);
  EXPECT_EQ(sample16(edge, 3), 16384);  // 16383.5
  EXPECT_EQ(sample16(edge, 4), -16384);
  writeWav(path + ".empty", Audio{{}, 1, 8000});
  EXPECT_EQ(readFileBytes(path + ".empty").size(), 44u);
}

TEST(Video, WavRefusesBadSound) {
  const std::string path = video_clip::outputPath("bad.wav");
  expectError([&] { writeWav(path, Audio{{0.0f}, 0, 8000}); }, "image::writeWav: the sound has 0 channels (1 to 64)");
  expectError([&] { writeWav(path, Audio{{0.0f}, 1, 0}); }, "image::writeWav: the sound's rate is 0 Hz");
  expectError([&] { writeWav(path, Audio{{0.0f, 0.0f, 0.0f}, 2, 8000}); },
              "image::writeWav: 3 samples are not a whole number of 2-channel frames");
  expectError([&] { writeWav("/nonexistent-folder/x.wav", Audio{{0.0f}, 1, 8000}); },
              "image::writeWav: cannot write /nonexistent-folder/x.wav: No such file or directory");
}

TEST(Video, WritesFramesAndWav) {
  const std::string folder = freshFolder("frames");
  const std::vector<Image> frames = video_clip::frames();
  const std::vector<std::string> files = writeFrames(folder + "/clip.mp4", frames, video_clip::sound());
  ASSERT_EQ(files.size(), frames.size() + 1);
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(files[i], folder + "/clip-000" + std::to_string(i + 1) + ".png");
    const Image back = decode(readFileBytes(files[i]));
    EXPECT_EQ(back.width, frames[i].width);
    EXPECT_EQ(back.height, frames[i].height);
    EXPECT_EQ(back.pixels, frames[i].pixels) << files[i];
  }
  EXPECT_EQ(files.back(), folder + "/clip.wav");
  EXPECT_EQ(readFileBytes(files.back()), readFileBytes(video_clip::outputPath("clip.wav")));

  // Any size, no sound; more than 9999 frames would take five digits.
  const std::vector<Image> odd{video_clip::frame(0, 5, 3)};
  EXPECT_EQ(writeFrames(folder + "/odd", odd), std::vector<std::string>{folder + "/odd-0001.png"});
  expectError([&] { writeFrames(folder + "/x.mp4", {}); }, "image::writeFrames: no frames");
  expectError([&] { writeFrames("/nonexistent-folder/x.mp4", odd); },
              "image::writeFrames: cannot write /nonexistent-folder/x-0001.png");
}

TEST(Video, RefusesBadInput) {
  const std::string path = video_clip::outputPath("bad.mp4");
  const std::vector<Image> frames = video_clip::frames();
  expectError([&] { writeVideo(path, std::vector<Image>{}, 8); }, "image::writeVideo: no frames");
  const std::vector<Image> odd{video_clip::frame(0, 63, 48)};
  expectError([&] { writeVideo(path, odd, 8); },
              "image::writeVideo: the frames are 63 x 48 pixels; yuv420p video needs even sides");
  const std::vector<Image> mixed{video_clip::frame(0), video_clip::frame(1, 32, 48)};
  expectError([&] { writeVideo(path, mixed, 8); }, "image::writeVideo: frame 1 is 32 x 48 pixels, frame 0 64 x 48");
  const std::vector<Image> short_{Image{4, 2, std::vector<uint8_t>(5)}};
  expectError([&] { writeVideo(path, short_, 8); }, "image::writeVideo: frame 0 has 5 bytes of pixels for 4 x 2");
  expectError([&] { writeVideo(path, frames, 0); }, "image::writeVideo: 0.000000 frames a second");
  expectError([&] { writeVideo(path, frames, 8, Audio{{0.0f, 0.0f, 0.0f}, 2, 48000}); },
              "image::writeVideo: 3 samples are not a whole number of 2-channel frames");
  expectError([&] { writeVideo(path, tensor::zeros({3, 48, 64}), 8); },
              "image::writeVideo: the frames must be [frames, 3, height, width], not [3, 48, 64]");
  EXPECT_FALSE(fs::exists(path));
}
