#pragma once
// Reading a model's tensors with the shape its architecture expects: a missing tensor or a wrong
// shape is a gizml::Error naming the tensor and both shapes.
#include <gizml/tensor.h>

#include <string>
#include <vector>

namespace gizml::llm {

class ConvertedModel;
struct StoredTensor;

/// The entry of `name`, checked to have `shape`.
const StoredTensor& storedTensor(const ConvertedModel& weights, const std::string& name, const tensor::Shape& shape);
/// A vector of n values (norms, biases) as floats.
std::vector<float> loadVector(const ConvertedModel& weights, const std::string& name, int64_t n);
/// An F32 tensor of `shape` (contents unspecified) where the weights' layers go.
tensor::Tensor placedEmpty(const ConvertedModel& weights, const tensor::Shape& shape);

/// values as an F32 tensor [values.size()] where the weights' layers go (ConvertedModel::gpu).
/// On a GPU they go up through the load's staging as the stored tensors do, small as they are
/// (norms, biases, RoPE's frequencies): every upload of a load one way, on its progress bar.
tensor::Tensor placedValues(const ConvertedModel& weights, const std::vector<float>& values);

/// values as an F32 tensor [values.size()] in host memory.
tensor::Tensor valuesTensor(const std::vector<float>& values);

}  // namespace gizml::llm
