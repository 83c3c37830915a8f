#pragma once
// gizml::image (the spec's gizlang:image): pictures in and out of the diffusion models. PNG and
// JPEG are read by libpng and libjpeg-turbo, PNG written by libpng; the conversions to and from
// tensors are ComfyUI's (LoadImage, the VAE's process_input/process_output, SaveImage). Video with
// sound is written as MP4 through FFmpeg's libraries, or as PNG frames and a WAV file without them.
#include <gizml/tensor.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gizml::image {

/// An 8-bit RGB picture: rows top to bottom, each pixel R, G, B (row-major HWC).
struct Image {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> pixels;  // width * height * 3 bytes
};

/// The largest picture decode reads: each side at most kMaxSide pixels and at most kMaxPixels
/// pixels in all (768 MiB of RGB), checked from the header before any pixel memory is allocated.
inline constexpr int64_t kMaxSide = 65535;
inline constexpr int64_t kMaxPixels = int64_t{1} << 28;

/// A PNG or JPEG file (told by its first bytes, not its name) as 8-bit RGB, converted as Pillow's
/// convert("RGB") does: alpha dropped (not composited), grey repeated in R, G and B, palettes
/// looked up, 16-bit samples cut to their high byte (Pillow's way for RGB; for 16-bit grey, whose
/// convert Pillow saturates at 255, too), CMYK/YCCK JPEGs by Pillow's formula (their values taken
/// as Adobe's inverted ones, as Pillow takes them). Then turned upright by its EXIF orientation
/// (Pillow's ImageOps.exif_transpose, which ComfyUI's LoadImage and diffusers' load_image apply;
/// in a PNG, an eXIf chunk before the pixels). Gamma and ICC profiles are not applied.
/// When width * height > maxPixels, the picture is scaled down as diffusers' Flux2 pipelines do
/// (Flux2ImageProcessor._resize_if_exceeds_area): s = sqrt(maxPixels / (width * height)), the new
/// sides int(width * s) and int(height * s) (a side of 0 becomes 1, and the other then keeps
/// within maxPixels), resampled by Pillow's LANCZOS filter, the same bytes as PIL's Image.resize.
/// A file that is not PNG or JPEG, is truncated or damaged, or is larger than kMaxSide or
/// kMaxPixels, is a gizml::Error naming what is wrong.
Image decode(std::span<const uint8_t> bytes, int64_t maxPixels = kMaxPixels);

/// The image itself when it holds at most maxPixels pixels, else scaled down as decode does
/// (diffusers' Flux2ImageProcessor._resize_if_exceeds_area).
Image fitArea(const Image& image, int64_t maxPixels);

/// The resampling filters of Pillow's Image.resize that resize reproduces byte for byte: LANCZOS
/// (a windowed sinc of 3 lobes) and BICUBIC (the cubic convolution with a = -0.5).
enum class Filter { Lanczos, Bicubic };

/// Pillow's resize(filter) of the image to width x height (each at least 1), the same bytes as
/// Pillow 13's, whose passes run along y first when the height shrinks by more than twice as many
/// pixels as the width (earlier Pillows always ran along x first, which can differ by a step).
Image resize(const Image& image, int64_t width, int64_t height, Filter filter = Filter::Lanczos);

/// The image as an 8-bit RGB PNG file (zlib level 4, ComfyUI's SaveImage's).
std::vector<uint8_t> encodePng(const Image& image);

/// The value range of a picture as a tensor: [0, 1] (ComfyUI's IMAGE) or [-1, 1] (a VAE's).
enum class Range { ZeroOne, MinusOneOne };

/// An F32 host tensor [3, height, width]: each byte b as f32(b) / 255 (ComfyUI's LoadImage), then
/// for MinusOneOne x * 2 - 1 (its VAE's process_input), in f32.
tensor::Tensor toTensor(const Image& image, Range range = Range::ZeroOne);

/// The image of a [3, height, width] tensor (any dtype or device; computed in f32): for
/// MinusOneOne first clamp((x + 1) / 2, 0, 1) (ComfyUI's VAE process_output), then
/// uint8(clip(255 * x, 0, 255)) truncated, not rounded (its SaveImage); NaN gives 0.
Image fromTensor(const tensor::Tensor& pixels, Range range = Range::ZeroOne);

/// Sound: f32 samples, nominally in [-1, 1], interleaved (frame after frame, each of `channels`
/// samples), at sampleRate frames a second. No samples is no sound.
struct Audio {
  std::vector<float> samples;
  int channels = 0;
  int sampleRate = 0;
};

/// The sound as a WAV file of 16-bit PCM (what every reader reads, Python's wave module too): each
/// sample clamped to [-1, 1], times 32767, rounded to nearest, ties to even (NaN gives 0). Audio
/// with channels outside 1 to 64, a rate outside 1 to 768000, samples not a whole number of
/// frames, or a file that cannot be written, is a gizml::Error naming it.
void writeWav(const std::string& path, const Audio& audio);

/// How this build writes video: "MP4 (H.264 by libx264, AAC) through FFmpeg's libraries" (or
/// MPEG-4 Part 2 video, libavcodec's own encoder, where libavcodec has no libx264), or, when it was
/// built without FFmpeg's libraries, "PNG frames and a WAV file (built without FFmpeg's libraries)".
std::string videoWriter();

/// The frames (all of one size, each side even: yuv420p halves the colour planes, and gizml
/// refuses an odd side rather than pad or crop the picture) at fps frames a second, with the sound
/// when it has samples, as an MP4 file at path (whatever its name says): H.264 by libx264 at CRF 18
/// (preset medium), else MPEG-4 Part 2 at quantizer 2, in yuv420p converted from RGB as BT.709
/// limited range and tagged so; AAC at 128 kb/s a channel by FFmpeg's own encoder, at the sound's
/// own rate (one of AAC's, 7350 to 96000 Hz); the index first (faststart), to play as it loads.
/// Built without FFmpeg's libraries, writeFrames(path, ...) instead. Returns the files written.
/// No frames, frames of different or odd sizes (in either build), fps outside (0, 1000], bad audio
/// (as writeWav) or a path that cannot be written is a gizml::Error naming it; a file left half
/// written by an error is removed.
std::vector<std::string> writeVideo(const std::string& path, std::span<const Image> frames, double fps,
                                    const Audio& audio = {});
/// The same from a [frames, 3, height, width] tensor (any dtype or device), each frame as
/// fromTensor(frame, range) gives it.
std::vector<std::string> writeVideo(const std::string& path, const tensor::Tensor& frames, double fps,
                                    const Audio& audio = {}, Range range = Range::ZeroOne);

/// The frames as PNG files and the sound as a WAV file, named from path less its extension:
/// "out.mp4" gives out-0001.png, out-0002.png, ... (four digits at least, from 1; FFmpeg's
/// image2 reader finds them as out-%04d.png) and out.wav when the sound has samples. Returns the
/// files written. Errors as writeVideo's, but any size of frame is written.
std::vector<std::string> writeFrames(const std::string& path, std::span<const Image> frames, const Audio& audio = {});

}  // namespace gizml::image
