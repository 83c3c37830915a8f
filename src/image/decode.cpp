// image::decode: the format from the file's first bytes, then the scaling down to maxPixels.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "image/codecs.h"

namespace gizml::image {

void checkSize(const char* format, uint64_t width, uint64_t height) {
  const bool fits = width > 0 && height > 0 && width <= uint64_t(kMaxSide) && height <= uint64_t(kMaxSide) &&
                    width * height <= uint64_t(kMaxPixels);
  if (!fits) [[unlikely]]
    throw Error(std::string(format) + ": " + std::to_string(width) + " x " + std::to_string(height) +
                " pixels is not a size gizml decodes (each side 1 to " + std::to_string(kMaxSide) + ", at most " +
                std::to_string(kMaxPixels) + " pixels)");
}

Image decode(std::span<const uint8_t> bytes, int64_t maxPixels) {
  check(maxPixels >= 1, "image::decode: maxPixels must be at least 1, not " + std::to_string(maxPixels));
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  static constexpr uint8_t kJpeg[3] = {0xff, 0xd8, 0xff};
  Image image;
  if (bytes.size() >= sizeof kPng && std::memcmp(bytes.data(), kPng, sizeof kPng) == 0) {
    image = decodePng(bytes);
  } else if (bytes.size() >= sizeof kJpeg && std::memcmp(bytes.data(), kJpeg, sizeof kJpeg) == 0) {
    image = decodeJpeg(bytes);
  } else {
    throw Error("image::decode: the " + std::to_string(bytes.size()) +
                " bytes are neither PNG nor JPEG (their first bytes are not those formats' signatures)");
  }
  return fitArea(image, maxPixels);
}

Image fitArea(const Image& image, int64_t maxPixels) {
  check(maxPixels >= 1, "image::fitArea: maxPixels must be at least 1, not " + std::to_string(maxPixels));
  if (image.width * image.height <= maxPixels) return image;
  // diffusers' Flux2ImageProcessor._resize_to_target_area, in doubles as Python computes it.
  const double scale = std::sqrt(double(maxPixels) / (double(image.width) * double(image.height)));
  const auto side = [&](int64_t n) { return std::max<int64_t>(1, int64_t(double(n) * scale)); };
  int64_t width = side(image.width), height = side(image.height);
  // A side cut to 0 becomes 1 (diffusers would fail there); the other then keeps within maxPixels.
  width = std::min(width, maxPixels / height);
  height = std::min(height, maxPixels / width);
  return resize(image, width, height);
}

}  // namespace gizml::image
