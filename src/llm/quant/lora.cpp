#include "llm/quant/lora.h"

#include <gizml/error.h>

#include <cmath>
#include <filesystem>

#include "llm/json_fields.h"

namespace gizml::llm {
namespace {

// PEFT wraps the model twice: base_model.model.<the model's own names>.
std::string baseName(const std::string& loraName, const std::string& suffix) {
  std::string n = loraName.substr(0, loraName.size() - suffix.size()) + ".weight";
  const std::string prefix = "base_model.model.";
  if (n.compare(0, prefix.size(), prefix) == 0) n = n.substr(prefix.size());
  return n;
}

}  // namespace

LoraAdapter::LoraAdapter(const std::string& folder) {
  namespace fs = std::filesystem;
  configPath_ = (fs::path(folder) / "adapter_config.json").string();
  const JsonFields cfg = JsonFields::read(configPath_);
  rank_ = cfg.getInt("r");
  check(rank_ > 0, cfg.where("r") + " must be positive");
  const double alpha = cfg.getFloat("lora_alpha");
  check(cfg.has("target_modules"), cfg.where("target_modules") + " is missing");
  const bool rs = cfg.getBool("use_rslora", false);
  scale_ = rs ? alpha / std::sqrt(static_cast<double>(rank_)) : alpha / static_cast<double>(rank_);

  file_ = std::make_unique<SafetensorsFile>((fs::path(folder) / "adapter_model.safetensors").string());
  for (const SafetensorsTensorInfo& t : file_->tensors()) {
    if (t.name.ends_with(".lora_A.weight")) {
      pairs_[baseName(t.name, ".lora_A.weight")].a = t.name;
    } else if (t.name.ends_with(".lora_B.weight")) {
      pairs_[baseName(t.name, ".lora_B.weight")].b = t.name;
    } else {
      throw Error(file_->path() + ": tensor " + t.name + " is neither lora_A nor lora_B");
    }
  }
  check(!pairs_.empty(), file_->path() + ": holds no LoRA tensors");
  for (const auto& [base, pair] : pairs_) {
    check(!pair.a.empty() && !pair.b.empty(), file_->path() + ": " + base + " has only one of lora_A and lora_B");
    const tensor::Shape& a = file_->tensor(pair.a).shape;
    const tensor::Shape& b = file_->tensor(pair.b).shape;
    check(a.size() == 2 && a[0] == rank_, file_->path() + ": " + pair.a + " has shape " +
                                              tensor::shapeText(a) + ", not [r=" + std::to_string(rank_) + ", in]");
    check(b.size() == 2 && b[1] == rank_, file_->path() + ": " + pair.b + " has shape " +
                                              tensor::shapeText(b) + ", not [out, r=" + std::to_string(rank_) + "]");
  }
}

std::vector<std::string> LoraAdapter::targets() const {
  std::vector<std::string> names;
  for (const auto& entry : pairs_) names.push_back(entry.first);
  return names;
}

tensor::Tensor LoraAdapter::merge(const std::string& weightName, const tensor::Tensor& weight) const {
  const auto it = pairs_.find(weightName);
  check(it != pairs_.end(), file_->path() + ": no LoRA pair for " + weightName);
  const tensor::Tensor a = file_->load(it->second.a).cast(DType::F32);
  const tensor::Tensor b = file_->load(it->second.b).cast(DType::F32);
  check(weight.ndim() == 2 && weight.size(0) == b.size(0) && weight.size(1) == a.size(1),
        file_->path() + ": " + it->second.b + " x " + it->second.a + " gives [" + std::to_string(b.size(0)) +
            ", " + std::to_string(a.size(1)) + "], but " + weightName + " is " + tensor::shapeText(weight.shape()));
  const tensor::Tensor delta = b.matmul(a);
  return (tensor::lazy(weight) + tensor::lazy(delta) * scale_).eval();
}

}  // namespace gizml::llm
