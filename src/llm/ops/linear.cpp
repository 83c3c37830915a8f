#include "llm/ops/linear.h"

#include <gizml/error.h>

#include <cmath>
#include <span>

#include "cpu/convert.h"
#include "cpu/float_panels.h"
#include "llm/ops/gpu/model_ops_gpu.h"
#include "llm/ops/gpu/weight_upload.h"
#include "llm/ops/host.h"
#include "llm/ops/weights.h"
#include "llm/quant/converted_model.h"
#include "tensor/gpu/tensor_ops.h"

namespace gizml::llm::ops {
namespace {

void checkRows(const char* op, const Tensor& t, int64_t rows, int64_t width) {
  require(t.numel() == rows * width, [&] {
      return std::string(op) + ": " + tensor::shapeText(t.shape()) + " is not " + std::to_string(rows) + " rows of "
             + std::to_string(width);
  });
}

}  // namespace

Linear::Linear(const ConvertedModel& weights, const std::string& name, int64_t out, int64_t in,
               const std::string& bias, Use use)
    : out_(out), in_(in) {
  const StoredTensor& t = storedTensor(weights, name, {out, in});
  data_ = weights.raw(t).data();
  file_ = &weights.file();
  quantized_ = t.quantized;
  dtype_ = t.dtype;
  if (use == Use::Multiply && weights.gpu()) {
    // On a GPU the kernels read the rows as stored (llm/ops/gpu/model_ops.cu.inc).
    if (quantized_) {
      format_ = t.format;
      rowBytes_ = groupRowBytes(format_, in);
      scaleBase_ = t.scaleBase;
    }
    // Through the load's pinned staging (ops::WeightUpload), which has read the bytes on return.
    const std::span<const uint8_t> bytes = weights.raw(t);
    WeightUpload& upload = weights.upload();
    onGpu_ = quantized_ ? upload.tensor(bytes, {static_cast<int64_t>(bytes.size())}, DType::U8)
                        : upload.tensor(bytes, {out, in}, dtype_);
    weights.releasePages(t);
    if (!quantized_ && dtype_ != DType::F32) {
      // 16-bit rows in the tensor-core product's layout (F16 scaled by a power of two a row).
      gpu::HalfWeights half = gpu::halfWeights(onGpu_, out, in);
      onGpu_ = half.rows;
      halfScales_ = half.scales;
    }
    if (!bias.empty()) biasOnGpu_ = placedValues(weights, loadVector(weights, bias, out));
    return;
  }
  if (quantized_) {
    format_ = t.format;
    rowBytes_ = groupRowBytes(format_, in);
    scaleBase_ = t.scaleBase;
    if (use == Use::Multiply) {
      matrix_ = std::make_shared<const QuantizedMatrix>(format_, t.scaleBase, data_, out_, in_);
      // The panels are a copy: the mapped bytes are only read again for rows (a tied embedding).
      if (!matrix_->readsSource()) weights.releasePages(t);
    }
  } else if (use == Use::Multiply) {
    panels_ = std::make_shared<const core::PageVector<uint8_t>>(cpu::packFloatPanels(dtype_, data_, out_, in_));
    weights.releasePages(t);
  }
  if (!bias.empty()) bias_ = loadVector(weights, bias, out);
}

int64_t Linear::storedRowBytes() const {
  return quantized_ ? rowBytes_ : in_ * static_cast<int64_t>(dtypeSize(dtype_));
}

void Linear::decodeRow(const uint8_t* stored, float* dst) const {
  if (quantized_) dequantizeGroups(format_, scaleBase_, stored, 1, in_, dst);
  else cpu::loadF32(dtype_, stored, 1, in_, dst);
}

void Linear::row(int64_t r, const Tensor& dst) const {
  require(r >= 0 && r < out_, [&] {
      return "row: " + std::to_string(r) + " is outside 0.." + std::to_string(out_ - 1);
  });
  rows({static_cast<int32_t>(r)}, dst);
}

void Linear::rows(const std::vector<int32_t>& ids, const Tensor& dst) const {
  for (int32_t r : ids)
    require(r >= 0 && r < out_, [&] { return "rows: " + std::to_string(r) + " is outside 0.." + std::to_string(out_ - 1); });
  const auto n = static_cast<int64_t>(ids.size());
  checkRows("rows", dst, n, in_);
  const Tensor host = dst.onGpu() ? tensor::empty({n, in_}) : dst;
  float* out = hostF32("rows", host);
  // A lookup's rows copied from the file, not read through the map: a few rows of a table would
  // map whole 2 MiB folios (the 16-bit Qwen3-shaped model's embedding held 271 MiB after a
  // 512-token prompt; core::MappedFile::copyOut).
  const int64_t bytes = storedRowBytes();
  std::vector<uint8_t> stored(static_cast<size_t>(bytes));
  for (int64_t i = 0; i < n; ++i) {
    file_->copyOut(data_ + ids[static_cast<size_t>(i)] * bytes, stored.size(), stored.data());
    decodeRow(stored.data(), out + i * in_);
  }
  if (!dst.onGpu()) return;
  // Read from the file in host memory, then one copy up: straight into dst where it is plain
  // F32 rows (from pageable memory the driver stages the bytes before returning).
  const gizhw::gpu::Gpu g = gpuops::gpuOf(dst);
  if (dst.dtype() != DType::F32 || !dst.isContiguous()) return tensor::assign(dst, host.on(g));
  g.copyToDevice(gpuops::address(dst), out, dtypeBytes(DType::F32, host.numel()), g.stream());
}

int32_t Linear::largestDot(const std::vector<int32_t>& ids, const Tensor& h) const {
  require(!ids.empty(), [&] { return "largestDot: no rows"; });
  checkRows("largestDot", h, 1, in_);
  // The rows are read from the file in host memory: a GPU's h comes down to them.
  const Tensor onHost = h.onGpu() ? h.host() : h;
  const float* x = hostF32("largestDot", onHost);
  std::vector<float> row(static_cast<size_t>(in_));
  float best = -INFINITY;
  int32_t found = ids.front();
  for (int32_t id : ids) {
    require(id >= 0 && id < out_, [&] {
        return "largestDot: row " + std::to_string(id) + " is outside 0.." + std::to_string(out_ - 1);
    });
    // In place: a draft's candidates are the same rows every draft (an eighth of the table).
    decodeRow(data_ + id * storedRowBytes(), row.data());
    float dot = 0.0f;
    for (int64_t j = 0; j < in_; ++j) dot += row[static_cast<size_t>(j)] * x[j];
    if (dot > best) best = dot, found = id;
  }
  return found;
}

void Linear::addBias(float* y, int64_t rows) const {
  if (bias_.empty()) return;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out_; ++o) y[r * out_ + o] += bias_[static_cast<size_t>(o)];
}

void Linear::applyAll(std::initializer_list<const Linear*> layers, const Tensor& x, std::initializer_list<Tensor> ys) {
  require(layers.size() > 0 && layers.size() == ys.size(), [&] { return "applyAll: one output a layer"; });
  const Linear& first = **layers.begin();
  const int64_t in = first.in_, rows = x.numel() / std::max<int64_t>(1, in);
  checkRows("applyAll", x, rows, in);
  if (x.onGpu()) {
    // The layers on the tensor cores read x made F16 once; the others (F32 rows, or not where x
    // is: apply names both) go alone.
    std::vector<gpu::LayerProduct> products;
    for (size_t i = 0; i < layers.size(); ++i) {
      const Linear& l = *layers.begin()[i];
      const Tensor& y = ys.begin()[i];
      require(l.in_ == in, [&] { return "applyAll: the layers read inputs of different widths"; });
      gpu::ProductRows p = l.productRows();
      if (p.kind == gpu::ProductRows::Kind::Float || !onGpu("Linear", {&x, &y, &l.onGpu_})) {
        l.apply(x, y);
        continue;
      }
      checkRows("applyAll", y, rows, l.out_);
      checkF32Rows("Linear", y);
      products.push_back({std::move(p), l.biasOnGpu_, y, l.out_});
    }
    checkF32Rows("Linear", x);
    gpu::products(x, products, rows, in);
    return;
  }
  // The quantized layers of the first one's group and their outputs, in lists this thread keeps
  // (a decode step makes ~120 products).
  thread_local std::vector<const QuantizedMatrix*> matrices;
  thread_local std::vector<float*> shared;
  matrices.clear();
  shared.clear();
  for (size_t i = 0; i < layers.size(); ++i) {
    const Linear& l = *layers.begin()[i];
    const Tensor& y = ys.begin()[i];
    require(l.in_ == in, [&] { return "applyAll: the layers read inputs of different widths"; });
    checkRows("applyAll", y, rows, l.out_);
    if (l.matrix_ && l.format_.group == first.format_.group) {
      matrices.push_back(l.matrix_.get());
      shared.push_back(hostF32("applyAll", y));
    } else {
      l.apply(x, y);
    }
  }
  if (matrices.empty()) return;
  matmulAll(matrices, hostF32("applyAll", x), rows, shared);
  size_t next = 0;
  for (const Linear* l : layers)
    if (l->matrix_ && l->format_.group == first.format_.group) l->addBias(shared[next++], rows);
}

gpu::ProductRows Linear::productRows() const {
  if (onGpu_.ndim() == 0) return {};
  if (quantized_)
    return {gpu::ProductRows::Kind::Group, onGpu_, {}, rowBytes_, format_.bits, static_cast<int>(format_.group), scaleBase_};
  gpu::ProductRows rows;
  rows.kind = halfScales_.ndim() > 0 ? gpu::ProductRows::Kind::Half : gpu::ProductRows::Kind::Float;
  rows.rows = onGpu_;
  rows.scales = halfScales_;
  return rows;
}

void Linear::apply(const Tensor& x, const Tensor& y) const {
  const int64_t rows = x.numel() / std::max<int64_t>(1, in_);
  checkRows("apply", x, rows, in_);
  checkRows("apply", y, rows, out_);
  if (onGpu("Linear", {&x, &y, &onGpu_})) {
    require(onGpu_.ndim() > 0, [&] { return "Linear: this layer's weights are in host memory, not on " + x.device(); });
    checkF32Rows("Linear", x);
    checkF32Rows("Linear", y);
    if (quantized_)
      return gpu::groupMatmul(x, onGpu_, biasOnGpu_, y, rows, out_, in_, rowBytes_, format_.bits,
                              static_cast<int>(format_.group), scaleBase_);
    if (halfScales_.ndim() > 0) return gpu::halfMatmul(x, {onGpu_, halfScales_}, biasOnGpu_, y, rows, out_, in_);
    return gpu::floatMatmul(x, onGpu_, biasOnGpu_, y, rows, out_, in_);
  }
  const float* in = hostF32("apply", x);
  float* out = hostF32("apply", y);
  if (quantized_) {
    require(matrix_ != nullptr, [&] { return "Linear: this layer was made to read rows, not to multiply"; });
    matrix_->matmul(in, rows, out);
  } else {
    require(panels_ != nullptr, [&] { return "Linear: this layer was made to read rows, not to multiply"; });
    cpu::floatPanelsMatmul(dtype_, panels_->data(), out_, in_, in, rows, out);
  }
  addBias(out, rows);
}

}  // namespace gizml::llm::ops
