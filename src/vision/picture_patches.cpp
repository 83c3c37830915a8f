// A picture to a vision tower's patches as transformers' Qwen2-VL image processor (its PIL backend,
// Qwen2VLImageProcessorPil, which Qwen3-VL and Qwen3.5 use) computes them: smart_resize's size,
// Pillow's BICUBIC resize, each byte times 1/255 in double then rounded to f32 (numpy's rescale),
// (x - mean) / std in f32 (its normalize), then the patches of blocks of mergeSize x mergeSize,
// the picture repeated to fill temporalPatchSize frames.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gizml/error.h>
#include <gizml/threads.h>
#include <gizml/vision.h>

namespace gizml::vision {
namespace {

// Sides up to 2^26 keep every product smartResize forms exact in an int64 and a double, as
// Python's ints and floats compute them.
constexpr int64_t kMaxSmartSide = int64_t{1} << 26;

std::string sizeText(int64_t height, int64_t width) {
  return "height " + std::to_string(height) + " and width " + std::to_string(width);
}

// The shortest text that reads back as the same number, with ".0" on whole numbers, as Python's
// repr prints a float ("0.5", "201.0", "204.08163265306123").
template <class Float>
std::string numberText(Float value) {
  char text[32];
  std::string number(text, std::to_chars(text, text + sizeof text, value).ptr);
  if (number.find_first_not_of("-0123456789") == std::string::npos) number += ".0";
  return number;
}

void checkConfig(const PatchConfig& config) {
  auto checkInRange = [](int64_t value, const char* name) {
    check(value >= 1 && value <= image::kMaxSide, std::string("vision::patches: ") + name + " is " +
                                                      std::to_string(value) + " (1 to " +
                                                      std::to_string(image::kMaxSide) + ")");
  };
  checkInRange(config.patchSize, "patchSize");
  checkInRange(config.temporalPatchSize, "temporalPatchSize");
  checkInRange(config.mergeSize, "mergeSize");
  check(config.minPixels >= 1 && config.maxPixels >= 1,
        "vision::patches: minPixels and maxPixels must be positive, not " + std::to_string(config.minPixels) + " and " +
            std::to_string(config.maxPixels));
  for (size_t c = 0; c < 3; ++c)
    check(std::isfinite(config.mean[c]) && std::isfinite(config.std[c]) && config.std[c] != 0.0f,
          "vision::patches: channel " + std::to_string(c) + "'s mean " + numberText(config.mean[c]) + " and std " +
              numberText(config.std[c]) + " must be finite and the std not 0");
}

// Each byte's normalized value per channel: numpy's rescale (f64 product, then f32) and
// normalize (f32 subtraction and division), computed once for all 256 bytes.
std::vector<float> normalizedBytes(const PatchConfig& config) {
  std::vector<float> table(3 * 256);
  for (size_t c = 0; c < 3; ++c)
    for (int byte = 0; byte < 256; ++byte) {
      const float rescaled = float(double(byte) * (1.0 / 255.0));
      table[c * 256 + size_t(byte)] = (rescaled - config.mean[c]) / config.std[c];
    }
  return table;
}

// The picture's values as [3, height, width] planes (channel-first, as the processor holds them).
std::vector<float> planes(const image::Image& picture, const PatchConfig& config) {
  const std::vector<float> table = normalizedBytes(config);
  const size_t plane = size_t(picture.width * picture.height);
  std::vector<float> values(3 * plane);
  for (size_t i = 0; i < plane; ++i)
    for (size_t c = 0; c < 3; ++c) values[c * plane + i] = table[c * 256 + picture.pixels[i * 3 + c]];
  return values;
}

}  // namespace

std::pair<int64_t, int64_t> smartResize(int64_t height, int64_t width, int64_t factor, int64_t minPixels,
                                        int64_t maxPixels) {
  check(
      height >= 1 && width >= 1 && height <= kMaxSmartSide && width <= kMaxSmartSide,
      "vision::smartResize: " + sizeText(height, width) + ": each side must be 1 to " + std::to_string(kMaxSmartSide));
  check(factor >= 1 && factor <= image::kMaxSide,
        "vision::smartResize: factor " + std::to_string(factor) + " (1 to " + std::to_string(image::kMaxSide) + ")");
  check(minPixels >= 1 && maxPixels >= 1, "vision::smartResize: minPixels and maxPixels must be positive, not " +
                                              std::to_string(minPixels) + " and " + std::to_string(maxPixels));
  const double aspect = double(std::max(height, width)) / double(std::min(height, width));
  check(aspect <= 200, "vision::smartResize: " + sizeText(height, width) + " have aspect ratio " + numberText(aspect) +
                           ", above 200, the most Qwen's image processor takes");
  const double h = double(height), w = double(width), f = double(factor);
  // Python's round() rounds halves to even, as rint does in the default rounding mode.
  int64_t hBar = int64_t(std::rint(h / f)) * factor;
  int64_t wBar = int64_t(std::rint(w / f)) * factor;
  if (hBar * wBar > maxPixels) {
    const double beta = std::sqrt(h * w / double(maxPixels));
    hBar = std::max(factor, int64_t(std::floor(h / beta / f)) * factor);
    wBar = std::max(factor, int64_t(std::floor(w / beta / f)) * factor);
  } else if (hBar * wBar < minPixels) {
    const double beta = std::sqrt(double(minPixels) / (h * w));
    hBar = int64_t(std::ceil(h * beta / f)) * factor;
    wBar = int64_t(std::ceil(w * beta / f)) * factor;
  }
  return {hBar, wBar};
}

Patches patches(const image::Image& picture, const PatchConfig& config) {
  check(picture.width >= 1 && picture.height >= 1 && picture.width <= image::kMaxSide &&
            picture.height <= image::kMaxSide && picture.pixels.size() == size_t(picture.width * picture.height * 3),
        "vision::patches: the picture is " + std::to_string(picture.width) + " x " + std::to_string(picture.height) +
            " pixels with " + std::to_string(picture.pixels.size()) + " bytes of RGB; it needs 1 to " +
            std::to_string(image::kMaxSide) + " pixels a side and 3 bytes a pixel");
  checkConfig(config);
  const int64_t p = config.patchSize, m = config.mergeSize, frames = config.temporalPatchSize;
  // (Not a structured binding: clang 14 refuses to capture one in the lambda below.)
  const std::pair<int64_t, int64_t> size = smartResize(picture.height, picture.width, p * m, config.minPixels, config.maxPixels);
  const int64_t height = size.first, width = size.second;
  const image::Image resized = image::resize(picture, width, height, image::Filter::Bicubic);
  const std::vector<float> values = planes(resized, config);

  const Grid grid{1, height / p, width / p};
  const int64_t rowLength = 3 * frames * p * p;
  Patches out{tensor::empty({grid.patches(), rowLength}), grid};
  float* rows = out.pixels.data<float>();
  const size_t plane = size_t(height * width);
  const int64_t blocksAcross = grid.w / m;
  core::parallelFor(grid.patches(), 64, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      // The row's block of m x m patches (row-major over the picture) and its patch in the block.
      const int64_t block = row / (m * m), inBlock = row % (m * m);
      const int64_t patchY = (block / blocksAcross) * m + inBlock / m;
      const int64_t patchX = (block % blocksAcross) * m + inBlock % m;
      float* dst = rows + row * rowLength;
      for (size_t c = 0; c < 3; ++c)
        for (int64_t frame = 0; frame < frames; ++frame)
          for (int64_t y = 0; y < p; ++y, dst += p) {
            const float* src = values.data() + c * plane + size_t((patchY * p + y) * width + patchX * p);
            std::memcpy(dst, src, size_t(p) * sizeof(float));
          }
    }
  });
  return out;
}

}  // namespace gizml::vision
