// Pillow's Image.resize(size, LANCZOS) of 8-bit RGB (libImaging/Resample.c), step for step so that
// the bytes are the same: a windowed sinc of 3 lobes, widened by the scale when shrinking; the
// weights of each output pixel computed in doubles, normalised to sum 1, then rounded to fixed
// point with 22 fractional bits; a horizontal pass over the rows the vertical pass needs, stored
// as bytes, then the vertical pass; each pass skipped when its side does not change.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include <gizml/threads.h>

#include "image/codecs.h"

namespace gizml::image {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;
constexpr double kSupport = 3.0;

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= std::numbers::pi;
  return std::sin(x) / x;
}

double lanczos(double x) { return -kSupport <= x && x < kSupport ? sinc(x) * sinc(x / kSupport) : 0.0; }

// The input span and fixed-point weights of each output position along one axis.
struct Weights {
  int64_t taps = 0;            // weights stored per output position
  std::vector<int64_t> first;  // the first input position each output position reads
  std::vector<int64_t> count;  // how many it reads
  std::vector<int32_t> weights;
};

Weights weights(int64_t inSize, int64_t outSize) {
  const double scale = double(inSize) / double(outSize);
  const double filterScale = std::max(scale, 1.0);
  const double support = kSupport * filterScale;
  const double inverseScale = 1.0 / filterScale;  // Pillow multiplies by it (not the same as dividing)
  Weights w;
  w.taps = int64_t(std::ceil(support)) * 2 + 1;
  w.first.resize(size_t(outSize));
  w.count.resize(size_t(outSize));
  w.weights.assign(size_t(outSize * w.taps), 0);
  std::vector<double> k(size_t(w.taps));
  for (int64_t out = 0; out < outSize; ++out) {
    const double center = (double(out) + 0.5) * scale;
    const int64_t first = std::max<int64_t>(0, int64_t(center - support + 0.5));
    const int64_t count = std::min<int64_t>(inSize, int64_t(center + support + 0.5)) - first;
    double sum = 0.0;
    for (int64_t i = 0; i < count; ++i) {
      k[size_t(i)] = lanczos((double(i + first) - center + 0.5) * inverseScale);
      sum += k[size_t(i)];
    }
    for (int64_t i = 0; i < count; ++i) {
      const double normalised = sum != 0.0 ? k[size_t(i)] / sum : k[size_t(i)];
      const double scaled = normalised * double(1 << kPrecisionBits);
      w.weights[size_t(out * w.taps + i)] = int32_t(normalised < 0 ? -0.5 + scaled : 0.5 + scaled);
    }
    w.first[size_t(out)] = first;
    w.count[size_t(out)] = count;
  }
  return w;
}

uint8_t clip8(int32_t sum) { return uint8_t(std::clamp(sum >> kPrecisionBits, 0, 255)); }

// out (outWidth x rows) from the input's rows firstRow.. resampled along x.
void horizontal(const Image& in, int64_t firstRow, const Weights& w, int64_t outWidth, int64_t rows,
                std::vector<uint8_t>& out) {
  core::parallelFor(rows, 8, [&](int64_t begin, int64_t end) {
    for (int64_t y = begin; y < end; ++y) {
      const uint8_t* src = in.pixels.data() + (firstRow + y) * in.width * 3;
      uint8_t* dst = out.data() + y * outWidth * 3;
      for (int64_t x = 0; x < outWidth; ++x) {
        const int32_t* k = w.weights.data() + x * w.taps;
        const uint8_t* p = src + w.first[size_t(x)] * 3;
        int32_t r = 1 << (kPrecisionBits - 1), g = r, b = r;
        for (int64_t i = 0; i < w.count[size_t(x)]; ++i) {
          r += p[i * 3] * k[i];
          g += p[i * 3 + 1] * k[i];
          b += p[i * 3 + 2] * k[i];
        }
        dst[x * 3] = clip8(r);
        dst[x * 3 + 1] = clip8(g);
        dst[x * 3 + 2] = clip8(b);
      }
    }
  });
}

// out (width x outHeight) from in's rows resampled along y; w's first rows count from firstRow.
void vertical(const uint8_t* in, int64_t width, int64_t firstRow, const Weights& w, int64_t outHeight,
              std::vector<uint8_t>& out) {
  const int64_t rowBytes = width * 3;
  core::parallelFor(outHeight, 4, [&](int64_t begin, int64_t end) {
    for (int64_t y = begin; y < end; ++y) {
      const int32_t* k = w.weights.data() + y * w.taps;
      const uint8_t* src = in + (w.first[size_t(y)] - firstRow) * rowBytes;
      uint8_t* dst = out.data() + y * rowBytes;
      for (int64_t x = 0; x < rowBytes; ++x) {
        int32_t sum = 1 << (kPrecisionBits - 1);
        for (int64_t i = 0; i < w.count[size_t(y)]; ++i) sum += src[i * rowBytes + x] * k[i];
        dst[x] = clip8(sum);
      }
    }
  });
}

}  // namespace

Image resize(const Image& image, int64_t width, int64_t height) {
  check(width >= 1 && height >= 1 && width <= kMaxSide && height <= kMaxSide && width * height <= kMaxPixels,
        "image::resize: " + std::to_string(width) + " x " + std::to_string(height) +
            " pixels is not a size gizml makes (each side 1 to " + std::to_string(kMaxSide) + ", at most " +
            std::to_string(kMaxPixels) + " pixels)");
  check(image.width >= 1 && image.height >= 1 && image.pixels.size() == size_t(image.width * image.height * 3),
        "image::resize: the image has " + std::to_string(image.pixels.size()) + " bytes of pixels for " +
            std::to_string(image.width) + " x " + std::to_string(image.height) + " RGB pixels");
  if (width == image.width && height == image.height) return image;
  const Weights across = weights(image.width, width);
  const Weights down = weights(image.height, height);
  // The rows the vertical pass reads (all of them when it does not run).
  const int64_t firstRow = height == image.height ? 0 : down.first.front();
  const int64_t endRow = height == image.height ? image.height : down.first.back() + down.count.back();
  Image out{width, height, {}};
  if (width == image.width) {
    out.pixels.resize(size_t(width * height * 3));
    vertical(image.pixels.data() + firstRow * width * 3, width, firstRow, down, height, out.pixels);
    return out;
  }
  std::vector<uint8_t> rows(size_t(width * (endRow - firstRow) * 3));
  horizontal(image, firstRow, across, width, endRow - firstRow, rows);
  if (height == image.height) {
    out.pixels = std::move(rows);
    return out;
  }
  out.pixels.resize(size_t(width * height * 3));
  vertical(rows.data(), width, firstRow, down, height, out.pixels);
  return out;
}

}  // namespace gizml::image
