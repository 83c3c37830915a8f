#pragma once
// The file formats under image::decode: each reads a whole file at its own size as 8-bit RGB,
// upright by its EXIF orientation, or throws gizml::Error naming the format and what is wrong.
#include <gizml/image.h>

#include <cstdint>
#include <span>

namespace gizml::image {

Image decodePng(std::span<const uint8_t> bytes);
Image decodeJpeg(std::span<const uint8_t> bytes);

/// The orientation (1 to 8) an EXIF block (its TIFF structure: "II" or "MM" first) gives, or 1
/// when it has none or it is damaged.
int exifOrientation(std::span<const uint8_t> tiff);
/// The image turned and flipped upright from the EXIF orientation (Pillow's exif_transpose).
Image orient(Image image, int orientation);

/// The size a header declares, checked against kMaxSide and kMaxPixels before any pixel memory
/// is allocated ("PNG: 0 x 5 pixels ..." on failure).
void checkSize(const char* format, uint64_t width, uint64_t height);

}  // namespace gizml::image
