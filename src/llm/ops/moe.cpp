#include "llm/ops/moe.h"

#include <gizml/error.h>

#include "cpu/moe_rows.h"
#include "llm/ops/gpu/model_ops_gpu.h"
#include "llm/ops/host.h"

namespace gizml::llm::ops {
namespace {

int64_t widthOf(const char* op, const Tensor& t) {
  require(t.ndim() == 2, [&] {
      return std::string(op) + ": rows [rows, width] expected, not " + tensor::shapeText(t.shape());
  });
  return t.size(1);
}

void checkIds(const char* op, const std::vector<int64_t>& ids, int64_t rows) {
  for (int64_t id : ids)
    require(id >= 0 && id < rows, [&] {
        return std::string(op) + ": row " + std::to_string(id) + " is outside 0.." + std::to_string(rows - 1);
    });
}

}  // namespace

Routes routeTopK(const Tensor& scores, int64_t topK) {
  const int64_t experts = widthOf("routeTopK", scores);
  require(topK > 0 && topK <= experts, [&] {
      return "routeTopK: top " + std::to_string(topK) + " of " + std::to_string(experts) + " experts";
  });
  // Routing is a few values a row and its result steers the host's loop over the experts: on a
  // GPU the scores come to host memory first.
  const Tensor onHost = scores.onGpu() ? scores.host() : scores;
  cpu::Routes r = cpu::routeTopK(hostF32("routeTopK", onHost), scores.size(0), experts, topK);
  return {std::move(r.rows), std::move(r.weights)};
}

void addWeightedRows(const Tensor& out, const std::vector<int64_t>& ids, const std::vector<float>& weights,
                     const Tensor& y) {
  const int64_t width = widthOf("addWeightedRows", out);
  checkIds("addWeightedRows", ids, out.size(0));
  require(weights.size() == ids.size() && y.numel() == static_cast<int64_t>(ids.size()) * width, [&] {
      return "addWeightedRows: one weight and one row of y a row id";
  });
  if (onGpu("addWeightedRows", {&out, &y})) {
    checkF32Rows("addWeightedRows", out);
    checkF32Rows("addWeightedRows", y);
    return gpu::addWeightedRows(out, ids, weights, y, width);
  }
  cpu::addWeightedRows(hostF32("addWeightedRows", out), ids, weights, hostF32("addWeightedRows", y), width);
}

void addGatedRows(const Tensor& out, const Tensor& y, const Tensor& gate) {
  const int64_t width = widthOf("addGatedRows", out), rows = out.size(0);
  require(y.numel() == out.numel() && gate.numel() == rows, [&] {
      return "addGatedRows: y and gate do not match the rows of out";
  });
  if (onGpu("addGatedRows", {&out, &y, &gate})) {
    checkF32Rows("addGatedRows", out);
    return (tensor::lazy(out) + tensor::lazy(y.reshape(out.shape())) * tensor::lazy(gate.reshape({rows, 1})).sigmoid())
        .evalInto(out);
  }
  cpu::addGatedRows(hostF32("addGatedRows", out), hostF32("addGatedRows", y), hostF32("addGatedRows", gate), rows, width);
}

}  // namespace gizml::llm::ops
