#include "llm/formats/safetensors_checkpoint.h"

#include <gizml/error.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace gizml::llm {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

}  // namespace

SafetensorsCheckpoint::SafetensorsCheckpoint(const std::string& path) : path_(path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path dir(path);
    if (fs::exists(dir / kIndexName, ec)) {
      openIndex((dir / kIndexName).string());
      return;
    }
    check(fs::exists(dir / kSingleName, ec),
          path + ": holds neither " + kIndexName + " nor " + kSingleName);
    shards_.push_back(std::make_unique<SafetensorsFile>((dir / kSingleName).string()));
  } else if (path.ends_with(".json")) {
    openIndex(path);
    return;
  } else {
    shards_.push_back(std::make_unique<SafetensorsFile>(path));
  }
  for (const SafetensorsTensorInfo& t : shards_[0]->tensors()) owner_.emplace(t.name, 0);
}

void SafetensorsCheckpoint::openIndex(const std::string& indexPath) {
  std::ifstream in(indexPath);
  check(static_cast<bool>(in), "cannot read " + indexPath);
  std::stringstream text;
  text << in.rdbuf();
  Json index;
  try {
    index = Json::parse(text.str());
  } catch (const Json::exception& e) {
    throw Error(indexPath + ": not valid JSON: " + e.what());
  }
  const auto map = index.is_object() ? index.find("weight_map") : index.end();
  check(map != index.end() && map->is_object(), indexPath + ": no weight_map object");

  // Shards open once each, in order of first mention.
  const fs::path dir = fs::path(indexPath).parent_path();
  std::unordered_map<std::string, size_t> shardIndex;
  for (const auto& [name, file] : map->items()) {
    check(file.is_string(), indexPath + ": weight_map entry of '" + name + "' is not a file name");
    const std::string shard = file.get<std::string>();
    // Shards live next to the index; a path elsewhere is a broken or hostile index.
    check(!shard.empty() && shard.find('/') == std::string::npos && shard != "." && shard != "..",
          indexPath + ": shard name '" + shard + "' is not a plain file name");
    auto [it, added] = shardIndex.emplace(shard, shards_.size());
    if (added) shards_.push_back(std::make_unique<SafetensorsFile>((dir / shard).string()));
    const SafetensorsFile& owner = *shards_[it->second];
    check(owner.findTensor(name) != nullptr,
          indexPath + ": maps '" + name + "' to " + shard + ", which does not hold it");
    owner_.emplace(name, it->second);
  }
  for (const auto& shard : shards_) {
    for (const SafetensorsTensorInfo& t : shard->tensors()) {
      check(owner_.count(t.name) && shards_[owner_.at(t.name)].get() == shard.get(),
            shard->path() + ": tensor '" + t.name + "' is not mapped to this shard by " + indexPath);
    }
  }
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  out.reserve(owner_.size());
  for (const auto& entry : owner_) out.push_back(entry.first);
  std::sort(out.begin(), out.end());
  return out;
}

const SafetensorsFile& SafetensorsCheckpoint::shardOf(const std::string& name) const {
  const auto it = owner_.find(name);
  check(it != owner_.end(), path_ + ": no tensor named '" + name + "'");
  return *shards_[it->second];
}

const SafetensorsTensorInfo& SafetensorsCheckpoint::tensor(const std::string& name) const {
  return shardOf(name).tensor(name);
}

tensor::Tensor SafetensorsCheckpoint::load(const std::string& name) const {
  return shardOf(name).load(name);
}

}  // namespace gizml::llm
