#include "cpu/moe_rows.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gizml::cpu {

Routes routeTopK(float* scores, int64_t rows, int64_t experts, int64_t topK) {
  Routes routes{std::vector<std::vector<int64_t>>(static_cast<size_t>(experts)),
                std::vector<std::vector<float>>(static_cast<size_t>(experts))};
  std::vector<int64_t> order(static_cast<size_t>(experts));
  for (int64_t r = 0; r < rows; ++r) {
    float* p = scores + r * experts;
    const float top = *std::max_element(p, p + experts);
    float sum = 0.0f;
    for (int64_t e = 0; e < experts; ++e) sum += (p[e] = std::exp(p[e] - top));
    for (int64_t e = 0; e < experts; ++e) p[e] /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    float kept = 0.0f;
    for (int64_t i = 0; i < topK; ++i) kept += p[order[static_cast<size_t>(i)]];
    for (int64_t i = 0; i < topK; ++i) {
      const int64_t e = order[static_cast<size_t>(i)];
      routes.rows[static_cast<size_t>(e)].push_back(r);
      routes.weights[static_cast<size_t>(e)].push_back(p[e] / kept);
    }
  }
  return routes;
}

void addWeightedRows(float* out, const std::vector<int64_t>& ids, const std::vector<float>& weights, const float* y,
                     int64_t width) {
  for (size_t i = 0; i < ids.size(); ++i) {
    float* o = out + ids[i] * width;
    const float w = weights[i];
    for (int64_t j = 0; j < width; ++j) o[j] += w * y[static_cast<int64_t>(i) * width + j];
  }
}

void addGatedRows(float* out, const float* y, const float* gate, int64_t rows, int64_t width) {
  for (int64_t r = 0; r < rows; ++r) {
    const float g = 1.0f / (1.0f + std::exp(-gate[r]));
    for (int64_t j = 0; j < width; ++j) out[r * width + j] += g * y[r * width + j];
  }
}

}  // namespace gizml::cpu
