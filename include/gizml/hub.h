#pragma once
// gizml::hub: models named on the Hugging Face hub (docs/models.md), fetched into the hub's own
// cache, which huggingface_hub shares (its environment variables, its layout), and read back
// from it. giz pull, list and rm, and every command that takes a model's name, stand on this.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace gizml::hub {

// ---- Names ----

/// A model's name on the hub, as giz takes it:
///   org/repo                 the repository at its main branch
///   org/repo:Q4_K_M          the GGUF file whose name holds that quantization (any case)
///   org/repo:file.gguf       that GGUF file
///   ...@REVISION             a branch, tag or 40-hex commit (default main)
///   ALIAS[@REVISION]         a short name from the catalogue (qwen3:0.6b, smollm2, ...)
/// An existing local path is never a name (the caller checks that first).
struct ModelName {
  std::string repo;                // "org/name"
  std::string revision = "main";
  std::string file;                // a GGUF file of the repository, or empty
  std::string quant;               // a quantization in the GGUF file's name, or empty
  /// The name written back: repo[:file or quant][@revision unless main].
  std::string text() const;
};

/// Parses text; throws gizml::Error saying what is wrong and what a name looks like.
ModelName parseName(const std::string& text);

/// One alias of the catalogue and what it stands for.
struct CatalogueEntry {
  std::string alias;
  std::string name;         // parsed like any other name
  std::string description;  // for docs and giz list
};

/// The committed catalogue of short names.
const std::vector<CatalogueEntry>& catalogue();

// ---- Where the hub is ----

/// Where the hub is and what we may do with it, from the environment variables huggingface_hub
/// reads, so that both share one cache and one token.
struct Settings {
  std::string endpoint;           // HF_ENDPOINT, default https://huggingface.co (no trailing /)
  std::filesystem::path cache;    // HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub
  std::string token;              // HF_TOKEN, else the token file; empty: anonymous
  bool offline = false;           // HF_HUB_OFFLINE=1 (or TRANSFORMERS_OFFLINE): never touch the network
};

/// The settings of this process's environment. Throws gizml::Error when no cache folder can be named.
Settings settingsFromEnvironment();

// ---- Fetching ----

/// The kind of model a set of files makes.
enum class ModelKind { Safetensors, Gguf, Diffusers };

/// A model's files at one commit, present in the cache.
struct Snapshot {
  std::string repo;
  std::string commit;
  std::filesystem::path folder;  // snapshots/{commit}
  ModelKind kind = ModelKind::Safetensors;
  std::string gguf;              // the GGUF file in folder (kind Gguf)
  /// What giz converts: the GGUF file, else the folder.
  std::filesystem::path source() const { return gguf.empty() ? folder : folder / gguf; }
};

/// How far to go for a name.
enum class Freshness {
  CachedFirst,  // a complete cached snapshot of the revision is used without the network (giz run)
  AskHub,       // the hub is asked for the revision's newest commit (giz pull)
};

/// The snapshot of name: from the cache, or downloaded (only the files the model needs, several
/// at once, resumed, each checked against its SHA-256 or git blob id before it is renamed into
/// place; progress on stderr). Offline (HF_HUB_OFFLINE) only the cache. Throws gizml::Error
/// that says what to do: gated or private (401/403: set HF_TOKEN), no such repository, revision
/// or file (404), the hub unreachable (listing what is cached), a checksum that does not match
/// (the download deleted).
Snapshot fetch(const ModelName& name, const Settings& settings, Freshness freshness);

// ---- The cache ----

/// The folder of repo ("org/name") in cache: {cache}/models--{org}--{name}.
std::filesystem::path repoFolder(const std::filesystem::path& cache, const std::string& repo);

/// The commit refs/{revision} holds, or "" when it is not there. A 40-hex revision is its own commit.
std::string cachedCommit(const std::filesystem::path& repoFolder, const std::string& revision);

struct CachedRepo {
  std::string repo;                           // "org/name"
  std::map<std::string, std::string> refs;    // revision -> commit
  std::vector<std::string> snapshots;         // commits with a snapshot folder
  int64_t bytes = 0;                          // of its blobs
};

/// Every model repository in cache, by name.
std::vector<CachedRepo> cachedRepos(const std::filesystem::path& cache);

/// "org/a, org/b" (or "none") for error messages.
std::string cachedNames(const std::filesystem::path& cache);

/// Removes snapshots/{commit}, the refs naming it and the blobs no other snapshot links to;
/// the repository's folder when nothing is left. Returns the bytes freed.
int64_t removeSnapshot(const std::filesystem::path& cache, const std::string& repo, const std::string& commit);

/// An exclusive flock on a file (made when missing), held until destruction: the cache's blobs
/// download under one, and giz converts under one. When another process holds it, says so on
/// stderr (naming what) and waits.
class FileLock {
 public:
  FileLock(const std::filesystem::path& file, const std::string& what);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

/// 1.5 MB, 320 kB, 12 B (decimal units, as the hub shows sizes).
std::string humanBytes(double bytes);

}  // namespace gizml::hub
