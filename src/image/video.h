#pragma once
// What image::writeVideo, writeFrames and writeWav share (src/image/video.cpp, wav.cpp, mp4_module.cpp).
#include <gizml/image.h>

#include <cstdint>
#include <span>
#include <string>

namespace gizml::image {

/// Throws gizml::Error ("<who>: ...") unless audio is a sound writeWav writes: 1 to 64 channels,
/// a rate of 1 to 768000 and a whole number of frames.
void checkAudio(const char* who, const Audio& audio);

/// Writes bytes to path, replacing it; an error ("<who>: cannot write <path>: <reason>") if not.
void writeFileBytes(const char* who, const std::string& path, std::span<const uint8_t> bytes);

/// The MP4 of writeVideo, its frames, fps and audio already checked, and what it holds ("MP4
/// (H.264 by libx264, AAC)"): through the MP4 module (mp4_module.cpp), only in a build with
/// FFmpeg's libraries; gizml::Error when the module cannot be loaded.
void writeMp4(const std::string& path, std::span<const Image> frames, double fps, const Audio& audio);
std::string mp4Contents();

}  // namespace gizml::image
