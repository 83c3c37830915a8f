#pragma once
// A sparse mixture of experts' routing and row movement on F32 row tensors (the MLP is
// llm/models/moe.h). CPU implementation: cpu/moe_rows.h.
#include <gizml/tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace gizml::llm::ops {

using tensor::Tensor;

class Linear;

/// Per expert, the rows routed to it (ascending) and their weights.
struct Routes {
  std::vector<std::vector<int64_t>> rows;
  std::vector<std::vector<float>> weights;
};

/// The router's scores [rows, experts] (in host memory overwritten by their softmax, in f32; on a
/// GPU read into host memory): each row keeps its
/// topK experts (the first of equals), weighted by their probabilities over the kept ones' sum.
Routes routeTopK(const Tensor& scores, int64_t topK);
/// A MoE layer's experts (gated MLPs with SiLU: gate and up [inner, hidden], down [hidden,
/// inner]) run with their routing kept on the GPU: nothing is read back, so a decode step with
/// them can be recorded and replayed. Each row's experts are chosen by routeTopK's rule (the
/// device's expf for the host's exp), each expert runs only on its rows (16 pairs a tile, as vLLM's
/// fused MoE groups them), and each row's experts are added in ascending order, as the host's
/// loop over the experts does: the same bits as that loop given the same routes.
class DeviceExperts {
 public:
  DeviceExperts() = default;
  /// Usable only where every layer is on one GPU in the tensor cores' formats, each projection's
  /// layers in one (group rows of one size, or 16-bit rows).
  DeviceExperts(const std::vector<const Linear*>& gates, const std::vector<const Linear*>& ups,
                const std::vector<const Linear*>& downs);
  bool usable() const { return tables_ != nullptr; }
  /// out [rows, hidden] = each row's topK experts by the router's scores [rows, experts] (on the
  /// GPU), weighted, applied to x [rows, hidden].
  void forward(const Tensor& x, const Tensor& scores, int64_t topK, const Tensor& out) const;

 private:
  struct Tables;
  std::shared_ptr<const Tables> tables_;
  int64_t hidden_ = 0, inner_ = 0;
};

/// out row ids[i] += weights[i] y row i.
void addWeightedRows(const Tensor& out, const std::vector<int64_t>& ids, const std::vector<float>& weights,
                     const Tensor& y);
/// out row r += sigmoid(gate[r]) y row r (gate [rows]).
void addGatedRows(const Tensor& out, const Tensor& y, const Tensor& gate);

}  // namespace gizml::llm::ops
