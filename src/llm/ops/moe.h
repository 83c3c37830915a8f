#pragma once
// A sparse mixture of experts' routing and row movement on F32 row tensors (the MLP is
// llm/models/moe.h). CPU implementation: cpu/moe_rows.h.
#include <gizml/tensor.h>

#include <cstdint>
#include <vector>

namespace gizml::llm::ops {

using tensor::Tensor;

/// Per expert, the rows routed to it (ascending) and their weights.
struct Routes {
  std::vector<std::vector<int64_t>> rows;
  std::vector<std::vector<float>> weights;
};

/// The router's scores [rows, experts] (in host memory overwritten by their softmax, in f32; on a
/// GPU read into host memory): each row keeps its
/// topK experts (the first of equals), weighted by their probabilities over the kept ones' sum.
Routes routeTopK(const Tensor& scores, int64_t topK);
/// out row ids[i] += weights[i] y row i.
void addWeightedRows(const Tensor& out, const std::vector<int64_t>& ids, const std::vector<float>& weights,
                     const Tensor& y);
/// out row r += sigmoid(gate[r]) y row r (gate [rows]).
void addGatedRows(const Tensor& out, const Tensor& y, const Tensor& gate);

}  // namespace gizml::llm::ops
