#pragma once
// The peak signal-to-noise ratio of two pictures of one size, in dB of the 8-bit peak (255); equal
// pictures give a large finite value (the squared error floored at 1e-9).
#include <gizml/image.h>

#include <algorithm>
#include <cmath>

namespace gizml::test {

inline double psnr(const image::Image& a, const image::Image& b) {
  double squares = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) squares += std::pow(double(a.pixels[i]) - double(b.pixels[i]), 2);
  return 10 * std::log10(255.0 * 255.0 * double(a.pixels.size()) / std::max(squares, 1e-9));
}

}  // namespace gizml::test
