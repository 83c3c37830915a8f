// giz pull NAME [--bits N], giz list [--catalogue], giz rm NAME: the models named on the hub, in
// the hub's cache (shared with huggingface_hub) and their conversions in ours (docs/models.md).
#include <gizml/error.h>
#include <gizml/hub.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "command_line.h"
#include "model_source.h"

namespace fs = std::filesystem;

namespace {

constexpr const char* kPullUsage =
    "usage: giz pull NAME [--bits 4]   download a model from the hub and convert it\n"
    "  NAME: org/repo, org/repo:QUANT, org/repo:FILE.gguf, each with an optional @REVISION, or an alias\n";
constexpr const char* kListUsage =
    "usage: giz list [--catalogue]   the models in the cache (name, size, format, bits), or the aliases\n";
constexpr const char* kRmUsage =
    "usage: giz rm NAME   remove a model's snapshot, the blobs no other snapshot uses, and its conversions\n";

// Bytes under a folder, links followed (a snapshot's files are links to blobs).
int64_t bytesUnder(const fs::path& folder) {
  int64_t bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(folder, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (fs::is_regular_file(it->path(), ec)) bytes += static_cast<int64_t>(fs::file_size(it->path(), ec));
  return bytes;
}

void row(const std::string& name, int64_t bytes, const std::string& format, const std::string& bits) {
  std::printf("%-60s %10s  %-11s %s\n", name.c_str(), gizml::hub::humanBytes(double(bytes)).c_str(), format.c_str(), bits.c_str());
}

// "org--name" back to "org/name".
std::string repoOfFolder(const std::string& folder) {
  const size_t split = folder.find("--");
  return split == std::string::npos ? folder : folder.substr(0, split) + "/" + folder.substr(split + 2);
}

void listHubCache(const gizml::hub::Settings& settings) {
  for (const gizml::hub::CachedRepo& repo : gizml::hub::cachedRepos(settings.cache))
    for (const std::string& commit : repo.snapshots) {
      std::string label = repo.repo + "@" + commit.substr(0, 12);
      for (const auto& [ref, target] : repo.refs)
        if (target == commit) label = ref == "main" ? repo.repo : repo.repo + "@" + ref;
      const fs::path snapshot = gizml::hub::repoFolder(settings.cache, repo.repo) / "snapshots" / commit;
      bool ggufs = false;
      std::error_code ec;
      for (auto it = fs::recursive_directory_iterator(snapshot, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->path().extension() == ".gguf") {
          ggufs = true;
          row(label + ":" + it->path().lexically_relative(snapshot).generic_string(), bytesUnder(it->path()), "gguf", "-");
        }
      if (!ggufs) row(label, bytesUnder(snapshot), fs::exists(snapshot / "model_index.json") ? "diffusers" : "safetensors", "-");
    }
}

// Our conversions: hub/{org}--{name}/{commit}/{variant}-{bits}bits, and local sources' folders.
void listConversions() {
  std::error_code ec;
  const fs::path root = convertedRoot();
  for (const fs::directory_entry& repo : fs::directory_iterator(root / "hub", ec))
    for (const fs::directory_entry& commit : fs::directory_iterator(repo.path(), ec))
      for (const fs::directory_entry& variant : fs::directory_iterator(commit.path(), ec)) {
        const std::string v = variant.path().filename().string();
        const size_t dash = v.rfind('-');
        if (!fs::exists(variant.path() / "manifest.json") || dash == std::string::npos) continue;
        std::string file;  // the variant's "--" back to "/"
        for (size_t i = 0; i < dash; ++i) {
          const bool separator = v.compare(i, 2, "--") == 0;
          file += separator ? '/' : v[i];
          i += separator ? 1 : 0;
        }
        std::string name = repoOfFolder(repo.path().filename().string());
        name.append("@").append(commit.path().filename().string().substr(0, 12));
        if (file != "safetensors") name.append(":").append(file);
        row(name, bytesUnder(variant.path()), "converted", v.substr(dash + 1, v.size() - dash - 5));
      }
  for (const fs::directory_entry& local : fs::directory_iterator(root, ec))
    if (fs::exists(local.path() / "manifest.json")) row(local.path().filename().string() + " (local source)", bytesUnder(local.path()), "converted", "-");
}

}  // namespace

int pullCommand(int argc, char** argv) {
  if (asksHelp(argc, argv, 2)) return usageReply(kPullUsage, true);
  std::string model;
  int bits = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--bits" && i + 1 < argc) bits = parseBits(argv[++i]);
    else if (arg.rfind("--", 0) == 0 || !model.empty()) return usageReply(kPullUsage, false);
    else model = arg;
  }
  if (model.empty()) return usageReply(kPullUsage, false);
  if (fs::exists(fs::path(model))) throw gizml::Error(model + " is a local path: giz pull takes a name on the hub");
  const gizml::hub::ModelName name = gizml::hub::parseName(model);
  const gizml::hub::Snapshot snapshot =
      gizml::hub::fetch(name, gizml::hub::settingsFromEnvironment(), gizml::hub::Freshness::AskHub);
  std::cout << name.text() << ": " << snapshot.repo << " at " << snapshot.commit << " in " << snapshot.source().string() << "\n";
  if (snapshot.kind == gizml::hub::ModelKind::Diffusers) {
    std::cout << "a diffusion pipeline: its files are there for giz paint\n";
    return 0;
  }
  const fs::path dest = hubConversion(snapshot, bits);
  convertOnce(snapshot.source(), dest, bits);
  std::cout << "converted: " << dest.string() << "\n";
  return 0;
}

int listCommand(int argc, char** argv) {
  if (asksHelp(argc, argv, 2)) return usageReply(kListUsage, true);
  if (argc == 3 && std::string(argv[2]) == "--catalogue") {
    for (const gizml::hub::CatalogueEntry& e : gizml::hub::catalogue())
      std::printf("%-15s %-40s %s\n", e.alias.c_str(), e.name.c_str(), e.description.c_str());
    return 0;
  }
  if (argc != 2) return usageReply(kListUsage, false);
  std::printf("%-60s %10s  %-11s %s\n", "NAME", "SIZE", "FORMAT", "BITS");
  listHubCache(gizml::hub::settingsFromEnvironment());
  listConversions();
  return 0;
}

int rmCommand(int argc, char** argv) {
  if (asksHelp(argc, argv, 2)) return usageReply(kRmUsage, true);
  if (argc != 3 || std::string(argv[2]).rfind("--", 0) == 0) return usageReply(kRmUsage, false);
  const gizml::hub::Settings settings = gizml::hub::settingsFromEnvironment();
  const gizml::hub::ModelName name = gizml::hub::parseName(argv[2]);
  const fs::path folder = gizml::hub::repoFolder(settings.cache, name.repo);
  const std::string commit = gizml::hub::cachedCommit(folder, name.revision);
  if (commit.empty() || !fs::exists(folder / "snapshots" / commit))
    throw gizml::Error(name.text() + " is not in the cache " + settings.cache.string() + " (cached models: " +
                       gizml::hub::cachedNames(settings.cache) + ")");
  gizml::hub::Snapshot snapshot;
  snapshot.repo = name.repo;
  snapshot.commit = commit;
  const fs::path conversions = hubConversion(snapshot, 0).parent_path();
  const int64_t converted = bytesUnder(conversions);
  fs::remove_all(conversions);
  std::error_code ec;
  if (fs::is_empty(conversions.parent_path(), ec)) fs::remove(conversions.parent_path(), ec);
  const int64_t freed = gizml::hub::removeSnapshot(settings.cache, name.repo, commit);
  std::cout << "removed " << name.repo << " at " << commit << ": " << gizml::hub::humanBytes(double(freed)) << " of downloads, "
            << gizml::hub::humanBytes(double(converted)) << " of conversions\n";
  return 0;
}
