#pragma once
// A sparse mixture of experts' routing and row movement on the CPU (llm/ops/moe.h).
#include <cstdint>
#include <vector>

namespace gizml::cpu {

/// Per expert, the rows routed to it (ascending) and their weights.
struct Routes {
  std::vector<std::vector<int64_t>> rows;
  std::vector<std::vector<float>> weights;
};

/// Each row of scores [rows, experts] (in place: its softmax in f32) keeps its topK experts (the
/// first of equals), weighted by their probabilities over the kept ones' sum.
Routes routeTopK(float* scores, int64_t rows, int64_t experts, int64_t topK);

/// out row ids[i] += weights[i] y row i.
void addWeightedRows(float* out, const std::vector<int64_t>& ids, const std::vector<float>& weights, const float* y,
                     int64_t width);
/// out row r += sigmoid(gate[r]) y row r, for `rows` rows.
void addGatedRows(float* out, const float* y, const float* gate, int64_t rows, int64_t width);

}  // namespace gizml::cpu
