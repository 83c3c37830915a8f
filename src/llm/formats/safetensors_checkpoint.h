#pragma once
// A checkpoint of one or more safetensors files: a single file, or the shards that a
// model.safetensors.index.json maps tensor names to ({"weight_map": {name: file}}).
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "llm/formats/safetensors.h"

namespace gizml::llm {

class SafetensorsCheckpoint {
 public:
  /// path: a .safetensors file, a model.safetensors.index.json, or a folder holding the index
  /// or a single model.safetensors. Opens every shard; throws gizml::Error when the index and
  /// the shards disagree.
  explicit SafetensorsCheckpoint(const std::string& path);

  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
  /// All tensor names, sorted.
  std::vector<std::string> names() const;
  bool has(const std::string& name) const { return owner_.count(name) != 0; }
  /// The shard holding a tensor; throws when there is none of that name.
  const SafetensorsFile& shardOf(const std::string& name) const;
  const SafetensorsTensorInfo& tensor(const std::string& name) const;
  tensor::Tensor load(const std::string& name) const;

 private:
  void openIndex(const std::string& indexPath);

  std::string path_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::unordered_map<std::string, size_t> owner_;  // tensor name -> shard
};

}  // namespace gizml::llm
