#pragma once
// Shared by the int8 kernel tests: group-quantized weights made by group_quant itself (rows of
// different magnitudes and offsets, so scales and zero points vary), and the double-precision
// product of the dequantized weights with the activations as their int8 codes decode.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cpu/quant_dot.h"
#include "llm/quant/group_quant.h"

namespace gizml::cpu::testing {

inline std::vector<float> gaussian(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Quantized {
  std::vector<uint8_t> bytes;
  std::vector<float> scales = std::vector<float>(256);
  std::vector<float> dequantized;  // by group_quant's decoder
  QuantWeights weights;
};

inline Quantized quantizeWeights(int bits, int64_t group, int64_t rows, int64_t cols, unsigned seed) {
  const llm::GroupFormat f{bits, group};
  Quantized q;
  std::vector<float> w = gaussian(static_cast<size_t>(rows * cols), seed);
  // Rows of different magnitudes and offsets, so that scales and zero points vary.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) w[static_cast<size_t>(r * cols + c)] = w[static_cast<size_t>(r * cols + c)] * (1.0f + static_cast<float>(r % 5)) + 0.3f * static_cast<float>(r % 3);
  const int64_t rowBytes = llm::groupRowBytes(f, cols);
  q.bytes.resize(static_cast<size_t>(rows * rowBytes));
  const float base = llm::quantizeGroups(f, w.data(), rows, cols, q.bytes.data());
  for (int e = 0; e < 256; ++e) q.scales[static_cast<size_t>(e)] = llm::groupScale(base, e);
  q.dequantized.resize(w.size());
  llm::dequantizeGroups(f, base, q.bytes.data(), rows, cols, q.dequantized.data());
  q.weights = QuantWeights{q.bytes.data(), rows, cols, rowBytes, bits, group, q.scales.data()};
  return q;
}

struct ReferenceDot {
  double value = 0, magnitude = 0;  // the product, and the sum of its terms' magnitudes
};

inline ReferenceDot referenceDot(const Quantized& q, const QuantActs& x, int64_t r, int64_t o) {
  const int64_t cols = q.weights.cols, groups = cols / x.group;
  ReferenceDot d;
  for (int64_t c = 0; c < cols; ++c) {
    const double a = static_cast<double>(x.scale[static_cast<size_t>(r * groups + c / x.group)]) *
                     x.codes[static_cast<size_t>(r * cols + c)];
    const double w = q.dequantized[static_cast<size_t>(o * cols + c)];
    d.value += w * a;
    d.magnitude += std::fabs(w * a);
  }
  return d;
}

}  // namespace gizml::cpu::testing
