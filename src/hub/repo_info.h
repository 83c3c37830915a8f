#pragma once
// What the hub's API says of a repository at a revision, and which of its files a model needs.
#include <cstdint>
#include <string>
#include <vector>

#include "hub/names.h"

namespace gizml::hub {

struct RepoFile {
  std::string path;    // in the repository
  int64_t size = -1;   // bytes (-1: not known, as for a file found in the cache)
  std::string blobId;  // git blob id (40 hex): the ETag of a file kept in git
  std::string sha256;  // the LFS oid (64 hex), empty for a file kept in git
  /// The name of its blob in the cache: the LFS sha256, else the git blob id.
  const std::string& etag() const { return sha256.empty() ? blobId : sha256; }
};

struct RepoInfo {
  std::string commit;  // 40 hex
  std::vector<RepoFile> files;
};

/// Parses the answer of GET /api/models/{repo}/revision/{rev}?blobs=true ({"sha": ..., "siblings":
/// [{"rfilename", "size", "blobId", "lfs": {"sha256", "size"}}]}). Throws gizml::Error naming the
/// field at fault; every path and hash is checked (paths stay inside the repository).
RepoInfo parseRepoInfo(const std::string& json);

/// The files a model needs, and the kind of model they make.
struct Selection {
  ModelKind kind = ModelKind::Safetensors;
  std::vector<RepoFile> files;
  std::string gguf;  // the chosen GGUF file (kind Gguf)
};

/// The files the model needs: a diffusers pipeline's model_index.json and its components'
/// configs, tokenizers and safetensors; else the one GGUF file the name picks (by file or
/// quantization; Q4_K_M when a GGUF-only repository is named alone); else the root safetensors
/// (and their index), config, generation config, tokenizer and chat template files.
/// modelIndex: the text of model_index.json when the repository has one (its components).
/// Throws gizml::Error listing what there is when nothing fits.
Selection selectFiles(const std::vector<RepoFile>& files, const ModelName& name, const std::string& modelIndex = "");

/// True for a 40-hex git commit or blob id.
bool isGitHash(const std::string& text);

}  // namespace gizml::hub
