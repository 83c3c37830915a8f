#pragma once
// The MP4 writer's module: src/image/mp4/, built with FFmpeg's libraries as libgizml_mp4.so and
// loaded by image::writeVideo at its first video (mp4_module.cpp), so that a program that writes
// no video does not load FFmpeg and the hundred libraries it needs. These are its entry points,
// looked up by name; neither lets an exception out.
#include <gizml/image.h>

#include <span>
#include <string>

namespace gizml::image {

inline constexpr const char* kMp4ModuleFile = "libgizml_mp4.so";

/// "gizml_mp4_write": writes the MP4 of writeVideo (its frames, fps and audio already checked);
/// false with the reason in error if it cannot.
using Mp4Write = bool(const std::string& path, std::span<const Image> frames, double fps, const Audio& audio,
                      std::string& error) noexcept;
/// "gizml_mp4_contents": what the MP4s hold ("MP4 (H.264 by libx264, AAC)").
using Mp4Contents = bool(std::string& contents, std::string& error) noexcept;

}  // namespace gizml::image
