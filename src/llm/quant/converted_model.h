#pragma once
// A converted model folder (docs/format.md): manifest.json (the ModelConfig, tokenizer files,
// chat template, tensor table) and weights.bin (64-byte-aligned tensor blobs), memory-mapped.
// open() checks the manifest against itself and the data file's size; every problem throws
// gizml::Error naming the file and field.
#include <gizhw/gpu.h>
#include <gizml/tensor.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "llm/model_config.h"
#include "llm/quant/group_quant.h"

namespace gizml::core {
class MappedFile;
}
namespace gizml::llm::ops {
class WeightUpload;
class WeightUploads;
}

namespace gizml::llm {

inline constexpr const char* kManifestName = "manifest.json";
inline constexpr const char* kDataName = "weights.bin";
inline constexpr int kFormatVersion = 1;
inline constexpr uint64_t kBlobAlignment = 64;

/// One entry of the tensor table: "f32", "f16", "bf16" (little-endian floats) or "q{bits}"
/// (group_quant.h).
struct StoredTensor {
  std::string name;
  tensor::Shape shape;
  bool quantized = false;
  DType dtype = DType::F32;  // unquantized only: F32, F16 or BF16
  GroupFormat format;      // quantized only
  float scaleBase = 0.0f;  // quantized only
  uint64_t offset = 0;     // in weights.bin, a multiple of kBlobAlignment
  uint64_t bytes = 0;

  int64_t numel() const;
  /// "f32", "f16", "bf16", "q4"
  std::string formatName() const;
  /// The bytes its shape and format take.
  uint64_t expectedBytes() const;
};

nlohmann::json storedTensorToJson(const StoredTensor& t);

class ConvertedModel {
 public:
  static ConvertedModel open(const std::string& folder);

  const std::string& folder() const { return folder_; }
  const ModelConfig& config() const { return config_; }
  const nlohmann::json& manifest() const { return manifest_; }
  const std::string& chatTemplate() const { return chatTemplate_; }
  const std::vector<StoredTensor>& tensors() const { return tensors_; }
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  /// The entry of a tensor; throws when there is none of that name.
  const StoredTensor& tensor(const std::string& name) const;
  /// The stored bytes, valid while this object (or a copy) lives.
  std::span<const uint8_t> raw(const StoredTensor& t) const;
  /// Lets the system drop t's pages from memory (after a copy of them was made); raw(t) stays
  /// valid and reads them from the file again.
  void releasePages(const StoredTensor& t) const;
  /// The mapped file the stored tensors are read from (kept open while this lives).
  const core::MappedFile& file() const { return *data_; }
  /// The values as a new F32 tensor of the stored shape.
  tensor::Tensor dequantize(const std::string& name) const;

  /// The same weights, to be placed on `gpu` by the layers made from them (llm/ops: their
  /// multiplying linears, norms and tables go there; embeddings are read from the file).
  ConvertedModel placedOn(const gizhw::gpu::Gpu& gpu) const {
    ConvertedModel placed = *this;
    placed.gpu_ = gpu;
    return placed;
  }
  /// Where the layers go: a GPU, or host memory (nullopt).
  const std::optional<gizhw::gpu::Gpu>& gpu() const { return gpu_; }
  /// The same weights, whose placements (placedOn) upload through `uploads` while the load that
  /// owns them runs (buildLanguageModel); not kept after it.
  ConvertedModel uploadingThrough(const std::shared_ptr<ops::WeightUploads>& uploads) const {
    ConvertedModel loading = *this;
    loading.uploads_ = uploads;
    return loading;
  }
  /// The uploads to the GPU the layers go to; an Error outside the load (uploadingThrough).
  ops::WeightUpload& upload() const;

 private:
  std::string folder_;
  nlohmann::json manifest_;
  ModelConfig config_;
  std::string chatTemplate_;
  std::vector<StoredTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::shared_ptr<core::MappedFile> data_;
  std::optional<gizhw::gpu::Gpu> gpu_;
  std::weak_ptr<ops::WeightUploads> uploads_;  // the load's: its staging buffers end with it
};

}  // namespace gizml::llm
