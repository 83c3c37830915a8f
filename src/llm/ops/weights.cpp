#include "llm/ops/weights.h"

#include <gizml/error.h>

#include <algorithm>
#include <span>

#include "llm/quant/converted_model.h"
#include "llm/ops/gpu/weight_upload.h"
#include "llm/ops/host.h"

namespace gizml::llm {

const StoredTensor& storedTensor(const ConvertedModel& weights, const std::string& name, const tensor::Shape& shape) {
  const StoredTensor& t = weights.tensor(name);
  check(t.shape == shape,
        weights.folder() + ": tensor '" + name + "' has shape " + tensor::shapeText(t.shape) + ", the model expects " + tensor::shapeText(shape));
  return t;
}

std::vector<float> loadVector(const ConvertedModel& weights, const std::string& name, int64_t n) {
  storedTensor(weights, name, {n});
  return weights.dequantize(name).toFloats();
}

tensor::Tensor placedEmpty(const ConvertedModel& weights, const tensor::Shape& shape) {
  return ops::emptyOn(weights.gpu(), shape);
}

tensor::Tensor placedValues(const ConvertedModel& weights, const std::vector<float>& values) {
  if (!weights.gpu()) return valuesTensor(values);
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float));
  return weights.upload().tensor(bytes, {static_cast<int64_t>(values.size())}, DType::F32);
}

tensor::Tensor valuesTensor(const std::vector<float>& values) {
  tensor::Tensor t = tensor::empty({static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

}  // namespace gizml::llm
