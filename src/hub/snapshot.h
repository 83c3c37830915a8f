#pragma once
// A model named on the hub, made present in the hub's cache: the file list from the API, only
// the files the model needs downloaded (several at once, resumed, each checked against its
// SHA-256 or git blob id before it is renamed into place), linked into snapshots/{commit}/.
#include <filesystem>
#include <string>

#include "hub/names.h"
#include "hub/repo_info.h"
#include "hub/settings.h"

namespace gizml::hub {

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

/// The snapshot of name: from the cache, or downloaded. Offline (HF_HUB_OFFLINE) only the cache.
/// Throws gizml::Error that says what to do: gated or private (401/403: set HF_TOKEN), no such
/// repository, revision or file (404), the hub unreachable (listing what is cached), a checksum
/// that does not match (the download deleted).
Snapshot fetch(const ModelName& name, const Settings& settings, Freshness freshness);

/// The snapshot of name in the cache when it holds every file the model needs, else kind=... with
/// an empty commit.
Snapshot cachedSnapshot(const ModelName& name, const Settings& settings);

/// Percent-encodes text for a URL, keeping [A-Za-z0-9._~-] and, when keepSlash, '/'.
std::string urlEncode(const std::string& text, bool keepSlash);

}  // namespace gizml::hub
