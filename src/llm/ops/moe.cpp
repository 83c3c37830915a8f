#include "llm/ops/moe.h"

#include <gizml/error.h>

#include "cpu/moe_rows.h"
#include "llm/ops/gpu/model_ops_gpu.h"
#include "llm/ops/host.h"
#include "llm/ops/linear.h"
#include "llm/ops/rows.h"
#include "tensor/gpu/tensor_ops.h"

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
  if (scores.onGpu() && experts <= gpu::kMostRoutedExperts) {
    // The device's routing (DeviceExperts' too), read back to steer the host's loop.
    checkF32Rows("routeTopK", scores);
    const int64_t rows = scores.size(0);
    const gpu::MoeRoutes device = gpu::moeRoute(scores, rows, experts, topK, false);
    const std::vector<int64_t> ids = device.ids.toInts();
    const std::vector<float> weights = device.weights.toFloats();
    Routes r{std::vector<std::vector<int64_t>>(static_cast<size_t>(experts)),
             std::vector<std::vector<float>>(static_cast<size_t>(experts))};
    for (size_t p = 0; p < ids.size(); ++p) {
      r.rows[static_cast<size_t>(ids[p])].push_back(static_cast<int64_t>(p) / topK);
      r.weights[static_cast<size_t>(ids[p])].push_back(weights[p]);
    }
    return r;
  }
  // (More experts than the device's routing takes: the scores come to host memory.)
  const Tensor onHost = scores.onGpu() ? scores.host() : scores;
  cpu::Routes r = cpu::routeTopK(hostF32("routeTopK", onHost), scores.size(0), experts, topK);
  return {std::move(r.rows), std::move(r.weights)};
}

struct DeviceExperts::Tables {
  gpu::ExpertRows gate, up, down;
};

DeviceExperts::DeviceExperts(const std::vector<const Linear*>& gates, const std::vector<const Linear*>& ups,
                             const std::vector<const Linear*>& downs) {
  if (gates.empty() || gates.size() != ups.size() || gates.size() != downs.size() ||
      static_cast<int64_t>(gates.size()) > gpu::kMostRoutedExperts)
    return;
  std::vector<gpu::ProductRows> rows[3];
  int i = 0;
  for (const std::vector<const Linear*>* layers : {&gates, &ups, &downs}) {
    for (const Linear* l : *layers) rows[i].push_back(l->productRows());
    ++i;
  }
  std::optional<gpu::ExpertRows> gate = gpu::expertRows(rows[0]), up = gpu::expertRows(rows[1]),
                                 down = gpu::expertRows(rows[2]);
  if (!gate || !up || !down || gpuops::gpuOf(gate->table) != gpuops::gpuOf(down->table)) return;
  tables_ = std::make_shared<const Tables>(Tables{*gate, *up, *down});
  hidden_ = gates.front()->in();
  inner_ = gates.front()->out();
}

void DeviceExperts::forward(const Tensor& x, const Tensor& scores, int64_t topK, const Tensor& out) const {
  require(usable(), [] { return "DeviceExperts: the experts are not on a GPU in the tensor cores' formats"; });
  const int64_t rows = x.numel() / hidden_, experts = tables_->gate.count;
  require(scores.numel() == rows * experts && out.numel() == rows * hidden_ && topK > 0 && topK <= experts, [&] {
      return "DeviceExperts: x " + tensor::shapeText(x.shape()) + ", scores " + tensor::shapeText(scores.shape())
             + ", out " + tensor::shapeText(out.shape()) + " and top " + std::to_string(topK) + " do not match";
  });
  require(onGpu("DeviceExperts", {&x, &scores, &out, &tables_->gate.table}), [] {
      return "DeviceExperts: the rows are in host memory";
  });
  for (const Tensor* t : {&x, &scores, &out}) checkF32Rows("DeviceExperts", *t);
  const gpu::MoeRoutes routes = gpu::moeRoute(scores, rows, experts, topK, true);
  const Tensor gate = emptyLike({rows * topK, inner_}, x), up = emptyLike({rows * topK, inner_}, x);
  gpu::moeProducts(x, {{&tables_->gate, gate}, {&tables_->up, up}}, routes, topK, inner_, hidden_);
  gatedActivation(gate, up, Activation::Silu);
  const Tensor y = emptyLike({rows * topK, hidden_}, x);
  gpu::moeProducts(gate, {{&tables_->down, y}}, routes, 1, hidden_, inner_);
  gpu::moeCombine(y, routes, out, hidden_);
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
    checkF32Rows("addGatedRows", y);
    checkF32Rows("addGatedRows", gate);
    return gpu::elementwise(gpu::Elementwise::AddGated, out, &y, 0, &gate, width);
  }
  cpu::addGatedRows(hostF32("addGatedRows", out), hostF32("addGatedRows", y), hostF32("addGatedRows", gate), rows, width);
}

}  // namespace gizml::llm::ops
