#include "hub/repo_info.h"

#include <gizml/error.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

namespace gizml::hub {

namespace {

using nlohmann::json;

bool isHex(const std::string& text, size_t length) {
  return text.size() == length &&
         std::all_of(text.begin(), text.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'); });
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string baseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string folderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

int64_t sizeField(const json& object, const std::string& where) {
  if (!object.contains("size")) return -1;
  const json& size = object["size"];
  if (!size.is_number_integer() || size.get<int64_t>() < 0) throw Error(where + ": \"size\" is not a byte count");
  return size.get<int64_t>();
}

// The files a language model needs beside its weights.
const std::set<std::string> kModelFiles = {"config.json", "generation_config.json", "tokenizer.json",
                                           "tokenizer_config.json", "special_tokens_map.json",
                                           "chat_template.jinja", "chat_template.json", "model.safetensors.index.json"};

// A diffusers component's files: its config, tokenizer files and weights.
bool componentFile(const std::string& base) {
  return endsWith(base, ".json") || endsWith(base, ".safetensors") || endsWith(base, ".jinja") ||
         base == "merges.txt" || base == "vocab.txt" || base == "spiece.model" || base == "tokenizer.model";
}

// The quantization appears in the file name as a word of its own: Q4_K matches neither Q4_K_M nor Q4_K_S.
bool holdsQuant(const std::string& file, const std::string& quant) {
  const std::string base = lower(baseName(file)), q = lower(quant);
  for (size_t at = base.find(q); at != std::string::npos; at = base.find(q, at + 1)) {
    const bool before = at == 0 || !std::isalnum(static_cast<unsigned char>(base[at - 1]));
    const size_t end = at + q.size();
    const bool after = end == base.size() || (!std::isalnum(static_cast<unsigned char>(base[end])) && base[end] != '_');
    if (before && after) return true;
  }
  return false;
}

std::string listOf(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& n : names) text += (text.empty() ? "" : ", ") + n;
  return text.empty() ? "none" : text;
}

Selection chooseGguf(const std::vector<RepoFile>& ggufs, const ModelName& name) {
  std::vector<const RepoFile*> matches;
  const std::string wanted = name.quant.empty() && name.file.empty() ? "Q4_K_M" : name.quant;
  for (const RepoFile& f : ggufs) {
    if (!name.file.empty() ? f.path == name.file : holdsQuant(f.path, wanted)) matches.push_back(&f);
  }
  std::vector<std::string> available;
  for (const RepoFile& f : ggufs) available.push_back(f.path);
  if (matches.empty()) {
    const std::string what = !name.file.empty() ? "no file " + name.file : "no GGUF file of quantization " + wanted;
    throw Error(name.repo + "@" + name.revision + " has " + what + " (its GGUF files: " + listOf(available) + ")");
  }
  if (matches.size() > 1) {
    std::vector<std::string> names;
    for (const RepoFile* f : matches) names.push_back(f->path);
    throw Error(name.repo + ": several GGUF files match " + wanted + " (" + listOf(names) +
                "): name one as " + name.repo + ":FILE.gguf (split GGUF files are not read)");
  }
  return {ModelKind::Gguf, {*matches.front()}, matches.front()->path};
}

Selection chooseDiffusers(const std::vector<RepoFile>& files, const ModelName& name, const std::string& modelIndex) {
  json index;
  try {
    index = json::parse(modelIndex);
  } catch (const json::exception& e) {
    throw Error(name.repo + ": model_index.json is not JSON: " + e.what());
  }
  if (!index.is_object()) throw Error(name.repo + ": model_index.json is not an object");
  // Components are the keys whose value is [library, class] (not null, not the _ fields).
  std::set<std::string> components;
  for (const auto& [key, value] : index.items())
    if (key.empty() || key[0] != '_')
      if (value.is_array() && value.size() == 2 && value[0].is_string() && value[1].is_string()) components.insert(key);
  Selection s{ModelKind::Diffusers, {}, ""};
  for (const RepoFile& f : files) {
    const std::string folder = folderOf(f.path);
    if (f.path == "model_index.json" || (components.count(folder) && componentFile(baseName(f.path)))) s.files.push_back(f);
  }
  return s;
}

}  // namespace

bool isGitHash(const std::string& text) { return isHex(text, 40); }

RepoInfo parseRepoInfo(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(std::string("the hub's answer is not JSON: ") + e.what());
  }
  if (!j.is_object()) throw Error("the hub's answer is not a JSON object");
  RepoInfo info;
  if (!j.contains("sha") || !j["sha"].is_string() || !isGitHash(j["sha"].get<std::string>()))
    throw Error("the hub's answer has no commit (\"sha\": 40 hex digits)");
  info.commit = j["sha"].get<std::string>();
  if (!j.contains("siblings") || !j["siblings"].is_array()) throw Error("the hub's answer has no file list (\"siblings\")");
  std::set<std::string> seen;
  for (const json& s : j["siblings"]) {
    if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string())
      throw Error("the hub's file list has an entry without \"rfilename\"");
    RepoFile f;
    f.path = s["rfilename"].get<std::string>();
    if (!safeRepoPath(f.path)) throw Error("the hub's file list names an unsafe path '" + f.path + "'");
    if (!seen.insert(f.path).second) throw Error("the hub's file list names " + f.path + " twice");
    const std::string where = "the hub's entry for " + f.path;
    f.size = sizeField(s, where);
    if (s.contains("blobId")) {
      if (!s["blobId"].is_string() || !isGitHash(s["blobId"].get<std::string>()))
        throw Error(where + ": \"blobId\" is not 40 hex digits");
      f.blobId = s["blobId"].get<std::string>();
    }
    if (s.contains("lfs") && !s["lfs"].is_null()) {
      const json& lfs = s["lfs"];
      if (!lfs.is_object() || !lfs.contains("sha256") || !lfs["sha256"].is_string() || !isHex(lfs["sha256"].get<std::string>(), 64))
        throw Error(where + ": \"lfs\" has no sha256 of 64 hex digits");
      f.sha256 = lfs["sha256"].get<std::string>();
      const int64_t lfsSize = sizeField(lfs, where + " (lfs)");
      if (lfsSize >= 0) f.size = lfsSize;
    }
    info.files.push_back(std::move(f));
  }
  return info;
}

Selection selectFiles(const std::vector<RepoFile>& files, const ModelName& name, const std::string& modelIndex) {
  std::vector<RepoFile> ggufs;
  for (const RepoFile& f : files)
    if (endsWith(lower(f.path), ".gguf") && lower(baseName(f.path)).rfind("mmproj", 0) != 0) ggufs.push_back(f);
  const bool hasIndex = std::any_of(files.begin(), files.end(), [](const RepoFile& f) { return f.path == "model_index.json"; });
  if (!name.file.empty() || !name.quant.empty()) return chooseGguf(ggufs, name);
  if (hasIndex) return chooseDiffusers(files, name, modelIndex);
  Selection s{ModelKind::Safetensors, {}, ""};
  bool weights = false;
  for (const RepoFile& f : files) {
    if (f.path.find('/') != std::string::npos) continue;
    const bool shard = endsWith(f.path, ".safetensors");
    weights |= shard;
    if (shard || kModelFiles.count(f.path)) s.files.push_back(f);
  }
  if (weights) return s;
  if (!ggufs.empty()) return chooseGguf(ggufs, name);
  std::vector<std::string> names;
  for (const RepoFile& f : files) names.push_back(f.path);
  throw Error(name.repo + "@" + name.revision + " has neither safetensors nor GGUF weights (its files: " + listOf(names) + ")");
}

}  // namespace gizml::hub
