// Pillow's Image.resize(size, LANCZOS or BICUBIC) of 8-bit RGB (libImaging/Resample.c), step for
// step so that the bytes are the same: the filter (a windowed sinc of 3 lobes, or the cubic
// convolution with a = -0.5 over 2 pixels each side) widened by the scale when shrinking; the
// weights of each output pixel computed in doubles, normalised to sum 1, then rounded to fixed
// point with 22 fractional bits; two passes, each rounding to bytes, in Pillow 13's order (see
// resize), each skipped when its side does not change.
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
constexpr double kLanczosLobes = 3.0;

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= std::numbers::pi;
  return std::sin(x) / x;
}

double lanczos(double x) { return -kLanczosLobes <= x && x < kLanczosLobes ? sinc(x) * sinc(x / kLanczosLobes) : 0.0; }

// Keys' cubic convolution with a = -0.5, its products in Pillow's order (the same doubles).
double bicubic(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// A filter and its support: the distance from the centre, in input pixels at scale 1, beyond
// which it is 0.
struct Kernel {
  double (*at)(double);
  double support;
};

Kernel kernelOf(Filter filter) {
  return filter == Filter::Bicubic ? Kernel{bicubic, 2.0} : Kernel{lanczos, kLanczosLobes};
}

// The input span and fixed-point weights of each output position along one axis.
struct Weights {
  int64_t taps = 0;            // weights stored per output position
  std::vector<int64_t> first;  // the first input position each output position reads
  std::vector<int64_t> count;  // how many it reads
  std::vector<int32_t> weights;
};

Weights weights(int64_t inSize, int64_t outSize, const Kernel& kernel) {
  const double scale = double(inSize) / double(outSize);
  const double filterScale = std::max(scale, 1.0);
  const double support = kernel.support * filterScale;
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
      k[size_t(i)] = kernel.at((double(i + first) - center + 0.5) * inverseScale);
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

// The input's rows [firstRow, endRow) resampled along x to outWidth.
Image alongX(const Image& in, const Weights& w, int64_t outWidth, int64_t firstRow, int64_t endRow) {
  Image out{outWidth, endRow - firstRow, std::vector<uint8_t>(size_t(outWidth * (endRow - firstRow) * 3))};
  core::parallelFor(out.height, 8, [&](int64_t begin, int64_t end) {
    for (int64_t y = begin; y < end; ++y) {
      const uint8_t* src = in.pixels.data() + (firstRow + y) * in.width * 3;
      uint8_t* dst = out.pixels.data() + y * outWidth * 3;
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
  return out;
}

// The input resampled along y to outHeight; its first row is row firstRow of the rows w counts.
Image alongY(const Image& in, const Weights& w, int64_t outHeight, int64_t firstRow) {
  Image out{in.width, outHeight, std::vector<uint8_t>(size_t(in.width * outHeight * 3))};
  const int64_t rowBytes = in.width * 3;
  core::parallelFor(outHeight, 4, [&](int64_t begin, int64_t end) {
    for (int64_t y = begin; y < end; ++y) {
      const int32_t* k = w.weights.data() + y * w.taps;
      const uint8_t* src = in.pixels.data() + (w.first[size_t(y)] - firstRow) * rowBytes;
      uint8_t* dst = out.pixels.data() + y * rowBytes;
      for (int64_t x = 0; x < rowBytes; ++x) {
        int32_t sum = 1 << (kPrecisionBits - 1);
        for (int64_t i = 0; i < w.count[size_t(y)]; ++i) sum += src[i * rowBytes + x] * k[i];
        dst[x] = clip8(sum);
      }
    }
  });
  return out;
}

}  // namespace

Image resize(const Image& image, int64_t width, int64_t height, Filter filter) {
  check(width >= 1 && height >= 1 && width <= kMaxSide && height <= kMaxSide && width * height <= kMaxPixels,
        "image::resize: " + std::to_string(width) + " x " + std::to_string(height) +
            " pixels is not a size gizml makes (each side 1 to " + std::to_string(kMaxSide) + ", at most " +
            std::to_string(kMaxPixels) + " pixels)");
  check(image.width >= 1 && image.height >= 1 && image.pixels.size() == size_t(image.width * image.height * 3),
        "image::resize: the image has " + std::to_string(image.pixels.size()) + " bytes of pixels for " +
            std::to_string(image.width) + " x " + std::to_string(image.height) + " RGB pixels");
  if (width == image.width && height == image.height) return image;
  const Kernel kernel = kernelOf(filter);
  const Weights across = weights(image.width, width, kernel);
  const Weights down = weights(image.height, height, kernel);
  if (height == image.height) return alongX(image, across, width, 0, image.height);
  if (width == image.width) return alongY(image, down, height, 0);
  // Pillow 13 resamples along y first when the height shrinks, by more than twice as many pixels
  // as the width loses (ImagingResampleInner); the order matters, as each pass rounds to bytes.
  if (height < image.height && image.height - height > 2 * (image.width - width))
    return alongX(alongY(image, down, height, 0), across, width, 0, height);
  // Else along x first, only the rows the vertical pass reads.
  const int64_t firstRow = down.first.front(), endRow = down.first.back() + down.count.back();
  return alongY(alongX(image, across, width, firstRow, endRow), down, height, firstRow);
}

}  // namespace gizml::image
