#pragma once
// Where convert reads a model: a Hugging Face folder (config.json + safetensors) or a GGUF file.
// Both give Hugging Face's tensor names and layouts in F32 (GGUF tensors dequantized, Llama's
// q/k rows un-permuted, Gemma's norm offsets removed, Qwen 3.5's layout undone (qwen35_gguf.h),
// stacked experts split) and the tokenizer files to copy; a multimodal Hugging Face folder also
// gives its vision tower as stored.
#include <gizml/tensor.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llm/model_config.h"

namespace gizml::llm {

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual const ModelConfig& config() const = 0;
  /// Hugging Face names of the text model's tensors, sorted.
  virtual std::vector<std::string> names() const = 0;
  virtual tensor::Shape shape(const std::string& name) const = 0;
  /// The tensor in F32, contiguous.
  virtual tensor::Tensor load(const std::string& name) const = 0;
  /// Writes the tokenizer into folder; returns the files written and the chat template.
  virtual std::vector<std::string> exportTokenizer(const std::string& folder, std::string& chatTemplate) const = 0;
  /// Writes the vision tower into folder (created) as a Hugging Face folder that
  /// vision::Tower::load reads; returns the files written, none when the source has no tower (a
  /// GGUF's is in llama.cpp's separate mmproj file).
  virtual std::vector<std::string> exportVisionTower(const std::string& /*folder*/) const { return {}; }
  virtual std::string description() const = 0;
};

/// Opens a folder (Hugging Face) or a .gguf file; throws gizml::Error naming what is missing.
std::unique_ptr<WeightSource> openWeightSource(const std::string& path);

/// The Hugging Face name of a llama.cpp tensor name ("blk.3.attn_q.weight" ->
/// "model.layers.3.self_attn.q_proj.weight"); empty when it has none. Blocks from `layers` on
/// are Qwen 3.5's MTP layers (mtp.*).
std::string hfNameOfGguf(const std::string& ggufName, Architecture arch, int64_t layers);

}  // namespace gizml::llm
