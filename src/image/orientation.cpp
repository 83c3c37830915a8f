// EXIF orientation (tag 0x0112 of the first IFD) and the turn that undoes it, as Pillow's
// ImageOps.exif_transpose, which ComfyUI's LoadImage and diffusers' load_image apply.
#include <string>

#include "image/codecs.h"

namespace gizml::image {

int exifOrientation(std::span<const uint8_t> tiff) {
  if (tiff.size() < 8) return 1;
  const bool little = tiff[0] == 'I' && tiff[1] == 'I';
  if (!little && !(tiff[0] == 'M' && tiff[1] == 'M')) return 1;
  const auto read = [&](size_t at, int bytes) {
    uint32_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint32_t(tiff[at + size_t(i)]) << (8 * (little ? i : bytes - 1 - i));
    return v;
  };
  const size_t ifd = read(4, 4);
  if (ifd + 2 > tiff.size()) return 1;
  const size_t entries = read(ifd, 2);
  for (size_t e = 0; e < entries; ++e) {
    const size_t at = ifd + 2 + e * 12;
    if (at + 12 > tiff.size()) return 1;
    if (read(at, 2) != 0x0112) continue;
    const uint32_t type = read(at + 2, 2), value = read(at + 8, 2);
    // A SHORT, as EXIF defines it; 1 to 8 (Pillow ignores other values too).
    return type == 3 && value >= 1 && value <= 8 ? int(value) : 1;
  }
  return 1;
}

Image orient(Image image, int orientation) {
  if (orientation <= 1 || orientation > 8) return image;
  const int64_t w = image.width, h = image.height;
  const bool swaps = orientation >= 5;  // 5 to 8 turn by a quarter: the sides trade places
  Image out{swaps ? h : w, swaps ? w : h, std::vector<uint8_t>(image.pixels.size())};
  for (int64_t y = 0; y < out.height; ++y)
    for (int64_t x = 0; x < out.width; ++x) {
      // The source of output pixel (x, y): Pillow's FLIP_LEFT_RIGHT, ROTATE_180, FLIP_TOP_BOTTOM,
      // TRANSPOSE, ROTATE_270, TRANSVERSE, ROTATE_90 for orientations 2 to 8.
      int64_t sx = x, sy = y;
      switch (orientation) {
        case 2: sx = w - 1 - x; break;
        case 3: sx = w - 1 - x; sy = h - 1 - y; break;
        case 4: sy = h - 1 - y; break;
        case 5: sx = y; sy = x; break;
        case 6: sx = y; sy = h - 1 - x; break;
        case 7: sx = w - 1 - y; sy = h - 1 - x; break;
        case 8: sx = w - 1 - y; sy = x; break;
      }
      for (int64_t c = 0; c < 3; ++c)
        out.pixels[size_t((y * out.width + x) * 3 + c)] = image.pixels[size_t((sy * w + sx) * 3 + c)];
    }
  return out;
}

}  // namespace gizml::image
