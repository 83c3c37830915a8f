// WAV files written by hand: the container is a 44-byte RIFF header before the little-endian
// samples (docs/architecture.md, "Dependencies"), so a library would add a dependency and
// no correctness.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "image/video.h"

namespace gizml::image {
namespace {

constexpr int kMaxChannels = 64;
constexpr int kMaxSampleRate = 768000;
constexpr uint32_t kBytesPerSample = 2;  // 16-bit PCM

void put16(std::vector<uint8_t>& out, uint32_t value) {
  out.push_back(uint8_t(value));
  out.push_back(uint8_t(value >> 8));
}
void put32(std::vector<uint8_t>& out, uint32_t value) {
  put16(out, value & 0xffff);
  put16(out, value >> 16);
}
void putTag(std::vector<uint8_t>& out, const char (&tag)[5]) { out.insert(out.end(), tag, tag + 4); }

}  // namespace

void checkAudio(const char* who, const Audio& audio) {
  check(audio.channels >= 1 && audio.channels <= kMaxChannels,
        std::string(who) + ": the sound has " + std::to_string(audio.channels) + " channels (1 to " +
            std::to_string(kMaxChannels) + ")");
  check(audio.sampleRate >= 1 && audio.sampleRate <= kMaxSampleRate,
        std::string(who) + ": the sound's rate is " + std::to_string(audio.sampleRate) + " Hz (1 to " +
            std::to_string(kMaxSampleRate) + ")");
  check(audio.samples.size() % size_t(audio.channels) == 0,
        std::string(who) + ": " + std::to_string(audio.samples.size()) + " samples are not a whole number of " +
            std::to_string(audio.channels) + "-channel frames");
}

void writeWav(const std::string& path, const Audio& audio) {
  checkAudio("image::writeWav", audio);
  const uint64_t dataBytes = uint64_t(audio.samples.size()) * kBytesPerSample;
  check(dataBytes <= 0xffffffffu - 36, "image::writeWav: " + std::to_string(audio.samples.size()) +
                                           " samples are more than a WAV file's 4 GiB hold");
  const uint32_t channels = uint32_t(audio.channels), rate = uint32_t(audio.sampleRate);
  std::vector<uint8_t> out;
  out.reserve(44 + dataBytes);
  putTag(out, "RIFF");
  put32(out, uint32_t(36 + dataBytes));
  putTag(out, "WAVE");
  putTag(out, "fmt ");
  put32(out, 16);  // the PCM format chunk's size
  put16(out, 1);   // WAVE_FORMAT_PCM
  put16(out, channels);
  put32(out, rate);
  put32(out, rate * channels * kBytesPerSample);  // bytes a second
  put16(out, channels * kBytesPerSample);          // bytes a frame
  put16(out, kBytesPerSample * 8);
  putTag(out, "data");
  put32(out, uint32_t(dataBytes));
  for (float x : audio.samples) {
    const float clamped = std::isnan(x) ? 0.0f : std::clamp(x, -1.0f, 1.0f);
    put16(out, uint16_t(int16_t(std::lrint(clamped * 32767.0f))));
  }
  writeFileBytes("image::writeWav", path, out);
}

}  // namespace gizml::image
