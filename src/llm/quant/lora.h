#pragma once
// A PEFT LoRA adapter folder: adapter_config.json (r, lora_alpha, target_modules, use_rslora)
// and adapter_model.safetensors (...lora_A.weight [r, in], ...lora_B.weight [out, r]). Merging
// gives W + scale B A with scale = alpha / r, or alpha / sqrt(r) with rsLoRA.
#include <gizml/tensor.h>

#include <map>
#include <memory>
#include <string>

#include "llm/formats/safetensors.h"

namespace gizml::llm {

class LoraAdapter {
 public:
  /// Reads and checks the folder: every lora_A has its lora_B, of rank r.
  explicit LoraAdapter(const std::string& folder);

  int64_t rank() const { return rank_; }
  double scale() const { return scale_; }
  /// Base weight names ("model.layers.0.self_attn.q_proj.weight") the adapter changes.
  std::vector<std::string> targets() const;
  bool changes(const std::string& weightName) const { return pairs_.count(weightName) != 0; }
  /// W + scale B A in f32; W must be the [out, in] F32 weight of weightName (an Error names
  /// the adapter file and tensor when the shapes disagree).
  tensor::Tensor merge(const std::string& weightName, const tensor::Tensor& weight) const;

 private:
  struct Pair {
    std::string a, b;  // tensor names in the adapter file
  };
  std::string configPath_;
  std::unique_ptr<SafetensorsFile> file_;
  int64_t rank_ = 0;
  double scale_ = 1.0;
  std::map<std::string, Pair> pairs_;  // base weight name -> its A and B
};

}  // namespace gizml::llm
