#pragma once
// A linear layer y = x W^T (+ b) over the weights as converted, on F32 row tensors. Group-
// quantized weights go through the integer kernels of cpu/quant_panels.h (activations quantized
// to int8 per group; several layers reading the same x share its codes and one parallel pass);
// f32 and 16-bit weights, repacked into cpu/float_panels.h's panels, through sgemm a block of
// output rows at a time, or for a few rows (decode) the panel kernel that gives sgemm's bits.
// Either way a pass reads the stored bytes once whatever the number of activation rows, and each
// row's outputs do not depend on the rows beside it (batch invariance, docs/architecture.md).
// The weights are repacked for the CPU when the layer is made, or uploaded as stored when the
// model is placed on a GPU (llm/ops/gpu/).
#include <gizml/dtype.h>
#include <gizml/group_quant.h>
#include <gizml/tensor.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/page_memory.h"
#include "llm/quant/group_quant.h"

namespace gizml::llm {

class ConvertedModel;

namespace ops {

using tensor::Tensor;

namespace gpu {
struct ProductRows;
}

class Linear {
 public:
  /// An embedding only reads rows; a layer that multiplies repacks quantized weights for the
  /// kernels when it is made.
  enum class Use { Multiply, Rows };

  Linear() = default;
  /// The tensor `name` ([out, in], f32, f16, bf16 or quantized), and `bias` ([out]) unless empty; throws
  /// gizml::Error naming a missing tensor or a wrong shape.
  Linear(const ConvertedModel& weights, const std::string& name, int64_t out, int64_t in,
         const std::string& bias = "", Use use = Use::Multiply);

  int64_t in() const { return in_; }
  int64_t out() const { return out_; }
  /// y [rows, out] = x [rows, in] W^T + b.
  void apply(const Tensor& x, const Tensor& y) const;
  /// layers[i]->apply(x, ys[i]) for layers that read the same x (q, k and v; gate and up): the
  /// quantized ones share x's int8 codes and one parallel pass over their weights.
  static void applyAll(std::initializer_list<const Linear*> layers, const Tensor& x, std::initializer_list<Tensor> ys);
  /// Where the layer multiplies on a GPU, how the products read its rows there (for kernels that
  /// choose the layer on the device: a MoE layer's experts); else no rows.
  gpu::ProductRows productRows() const;
  /// Row r of W (an embedding lookup) into dst ([in] values), as floats.
  void row(int64_t r, const Tensor& dst) const;
  /// Rows ids[i] of W into row i of dst ([ids, in] values): on a GPU, one copy up.
  void rows(const std::vector<int32_t>& ids, const Tensor& dst) const;
  /// Of the rows `ids` of W, the one whose dot product with h ([in]) is largest (the first of
  /// equals; sums in order over the row).
  int32_t largestDot(const std::vector<int32_t>& ids, const Tensor& h) const;

 private:
  /// Bytes of one stored row.
  int64_t storedRowBytes() const;
  /// The stored row at `stored` as floats, whatever the stored format.
  void decodeRow(const uint8_t* stored, float* dst) const;
  void addBias(float* y, int64_t rows) const;

  int64_t out_ = 0, in_ = 0;
  const uint8_t* data_ = nullptr;  // in the mapped weights, which the model keeps open
  const core::MappedFile* file_ = nullptr;  // that map, which reads a lookup's rows without mapping them
  bool quantized_ = false;
  DType dtype_ = DType::F32;  // unquantized only
  GroupFormat format_;
  int64_t rowBytes_ = 0;
  float scaleBase_ = 0;
  std::shared_ptr<const QuantizedMatrix> matrix_;  // quantized and Use::Multiply
  std::shared_ptr<const core::PageVector<uint8_t>> panels_;  // f32 or 16-bit and Use::Multiply
  std::vector<float> bias_;
  // Where the model is on a GPU (ConvertedModel::gpu) and the layer multiplies: its rows there
  // (group-format and F32 rows as stored; 16-bit ones as F16 rows scaled apart, halfScales_) and its
  // bias [out] (or no tensor); nothing in host memory then.
  Tensor onGpu_, biasOnGpu_;
  Tensor halfScales_;  // 16-bit rows on a GPU: each row's power of two (gpu::HalfWeights)
};

}  // namespace ops
}  // namespace gizml::llm
