#pragma once
// A safetensors file's tensors under one name prefix, taken by name: each checked and converted
// to F32 as it is taken, so that what remains under the prefix afterwards is what the model does
// not use. Errors name the file and the tensor.
#include <gizml/safetensors.h>
#include <gizml/tensor.h>

#include <map>
#include <set>
#include <string>

namespace gizml::diffusion {

class WeightFile {
 public:
  /// model: what the file should hold, for the errors ("a FLUX.1 VAE").
  WeightFile(std::string path, std::string prefix, std::string model)
      : path_(std::move(path)), prefix_(std::move(prefix)), model_(std::move(model)),
        all_(llm::loadSafetensors(path_)) {}

  bool has(const std::string& name) const { return all_.count(prefix_ + name) != 0; }

  // The tensor's shape as stored (before any check of its size).
  T::Shape shapeOf(const std::string& name) const { return find(name).shape(); }

  T::Tensor take(const std::string& name, const T::Shape& shape) {
    const T::Tensor& t = find(name);
    if (t.shape() != shape) fail(name, "has shape " + T::shapeText(t.shape()) + ", expected " + T::shapeText(shape));
    const DType d = t.dtype();
    if (d != DType::F32 && d != DType::F16 && d != DType::BF16)
      fail(name, std::string("is ") + dtypeName(d) + ", expected f32, f16 or bf16");
    taken_.insert(prefix_ + name);
    return t.cast(DType::F32).contiguous();
  }

  // The tensors under the prefix that were never taken.
  void requireAllTaken() const {
    for (const auto& [name, t] : all_)
      if (name.rfind(prefix_, 0) == 0 && taken_.count(name) == 0)
        throw Error(path_ + ": tensor " + name + " is not part of " + model_);
  }

  [[noreturn]] void fail(const std::string& name, const std::string& what) const {
    throw Error(path_ + ": tensor " + prefix_ + name + " " + what);
  }

 private:
  const T::Tensor& find(const std::string& name) const {
    const auto it = all_.find(prefix_ + name);
    if (it == all_.end()) throw Error(path_ + ": no tensor " + prefix_ + name + " (not " + model_ + "?)");
    return it->second;
  }

  std::string path_, prefix_, model_;
  std::map<std::string, T::Tensor> all_;
  std::set<std::string> taken_;
};

}  // namespace gizml::diffusion
