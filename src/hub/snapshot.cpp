#include "hub/snapshot.h"

#include <gizml/error.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <exception>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "hub/cache.h"
#include "hub/checksum.h"
#include "hub/http_client.h"
#include "hub/names.h"
#include "hub/progress.h"
#include "hub/repo_info.h"

namespace fs = std::filesystem;

namespace gizml::hub {

namespace {

constexpr size_t kParallelDownloads = 4;

std::string readFile(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string cachedList(const Settings& s) {
  return "cached models: " + cachedNames(s.cache) + "; HF_HUB_OFFLINE=1 uses only the cache";
}

// The hub's answers turned into what to do. Its X-Error-Code tells a missing repository (which
// it answers 401 to a caller without a token) from a gated one.
[[noreturn]] void explain(const HttpError& e, const std::string& what, const Settings& s) {
  const std::string status = " (HTTP " + std::to_string(e.status) + (e.errorCode.empty() ? "" : " " + e.errorCode) + ")";
  if (e.errorCode == "RepoNotFound")
    throw Error(what + ": no such repository on " + s.endpoint + status +
                (s.token.empty() ? "; if it is private, set HF_TOKEN" : ""));
  if (e.errorCode == "RevisionNotFound") throw Error(what + ": no such revision" + status);
  if (e.errorCode == "EntryNotFound") throw Error(what + ": no such file" + status);
  if (e.status == 401 || e.status == 403)
    throw Error(what + ": gated or private repository" + status + ": accept its licence on " + s.endpoint +
                " and set HF_TOKEN (or the token file of `hf auth login`)" +
                (s.token.empty() ? "" : "; the token given has no access to it"));
  if (e.status == 404) throw Error(what + ": no such repository, revision or file on " + s.endpoint + status);
  throw Error(what + ": " + e.what());
}

[[noreturn]] void unreachable(const UnreachableError& e, const Settings& s) {
  throw Error("cannot reach " + s.endpoint + ": " + e.what() + " (" + cachedList(s) + ")");
}

// The git-kept or LFS file's bytes are what the hub said; else the download is deleted.
void verify(const fs::path& file, const RepoFile& f) {
  const auto reject = [&](const std::string& what, const std::string& expected, const std::string& got) {
    fs::remove(file);
    throw Error(f.path + ": " + what + " mismatch: expected " + expected + ", got " + got +
                "; the download was deleted (run the command again to fetch it anew)");
  };
  const int64_t size = static_cast<int64_t>(fs::file_size(file));
  if (f.size >= 0 && size != f.size) reject("size", std::to_string(f.size) + " bytes", std::to_string(size) + " bytes");
  if (!f.sha256.empty()) {
    const std::string got = sha256OfFile(file);
    if (got != f.sha256) reject("sha256", f.sha256, got);
  } else {
    const std::string got = gitBlobIdOfFile(file);
    if (got != f.blobId) reject("git blob id", f.blobId, got);
  }
}

struct Job {
  const HttpClient& http;
  const Settings& settings;
  const std::string& repo;
  const std::string& commit;
};

void downloadOne(const Job& job, const RepoFile& f, DownloadProgress& progress, size_t index) {
  const fs::path folder = repoFolder(job.settings.cache, job.repo);
  const fs::path blob = folder / "blobs" / f.etag();
  FileLock lock(blobLock(job.settings.cache, job.repo, f.etag()), job.repo + "/" + f.path);
  if (!fs::exists(blob)) {  // else another process fetched it while we waited
    fs::create_directories(blob.parent_path());
    const fs::path incomplete = blob.string() + ".incomplete";
    const std::string url = job.settings.endpoint + "/" + job.repo + "/resolve/" + job.commit + "/" + urlEncode(f.path, true);
    try {
      job.http.download(url, incomplete, [&](int64_t bytes) { progress.update(index, bytes); });
    } catch (const HttpError& e) {
      explain(e, job.repo + "/" + f.path, job.settings);
    } catch (const UnreachableError& e) {
      unreachable(e, job.settings);
    }
    verify(incomplete, f);
    fs::rename(incomplete, blob);
  }
  linkSnapshotFile(folder, job.commit, f.path, f.etag());
  progress.done(index);
}

// Every file not yet in the snapshot, kParallelDownloads at a time; the first error is thrown
// once the others have stopped (each leaves its .incomplete file to be resumed).
void downloadAll(const Job& job, const std::vector<RepoFile>& files) {
  const fs::path snapshot = repoFolder(job.settings.cache, job.repo) / "snapshots" / job.commit;
  std::vector<RepoFile> missing;
  for (const RepoFile& f : files) {
    if (f.etag().empty()) throw Error("the hub gave neither a blobId nor an LFS sha256 for " + f.path);
    if (!fs::exists(snapshot / f.path)) missing.push_back(f);
  }
  if (missing.empty()) return;
  std::vector<std::pair<std::string, int64_t>> names;
  for (const RepoFile& f : missing) names.emplace_back(f.path, f.size);
  DownloadProgress progress(names);
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failureMutex;
  const auto work = [&] {
    for (size_t i = next++; i < missing.size(); i = next++) {
      try {
        downloadOne(job, missing[i], progress, i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failureMutex);
        if (!failure) failure = std::current_exception();
        next = missing.size();
      }
    }
  };
  std::vector<std::thread> workers;
  for (size_t w = 0; w < std::min(kParallelDownloads, missing.size()); ++w) workers.emplace_back(work);
  for (std::thread& t : workers) t.join();
  if (failure) std::rethrow_exception(failure);
  progress.finish();
}

// The files of a snapshot folder (the links whose blobs are there), as repository paths.
std::vector<RepoFile> filesIn(const fs::path& snapshot) {
  std::vector<RepoFile> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(snapshot, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (fs::is_regular_file(it->path())) {
      RepoFile f;
      f.path = it->path().lexically_relative(snapshot).generic_string();
      files.push_back(f);
    }
  return files;
}

// A language model's safetensors are all there: config.json and every shard its index names.
bool complete(const fs::path& snapshot, const Selection& selection) {
  if (selection.kind != ModelKind::Safetensors) return true;
  if (!fs::exists(snapshot / "config.json")) return false;
  const fs::path index = snapshot / "model.safetensors.index.json";
  if (!fs::exists(index)) return fs::exists(snapshot / "model.safetensors");
  try {
    const nlohmann::json j = nlohmann::json::parse(readFile(index));
    for (const auto& [tensor, shard] : j.at("weight_map").items())
      if (!shard.is_string() || !safeRepoPath(shard.get<std::string>()) || !fs::exists(snapshot / shard.get<std::string>())) return false;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  return true;
}

}  // namespace

std::string urlEncode(const std::string& text, bool keepSlash) {
  static const char* const hex = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '~' || c == '-' || (keepSlash && c == '/')) out += static_cast<char>(c);
    else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

Snapshot cachedSnapshot(const ModelName& name, const Settings& settings) {
  Snapshot snap;
  snap.repo = name.repo;
  const fs::path folder = repoFolder(settings.cache, name.repo);
  const std::string commit = cachedCommit(folder, name.revision);
  if (commit.empty() || !fs::is_directory(folder / "snapshots" / commit)) return snap;
  const fs::path snapshot = folder / "snapshots" / commit;
  const std::vector<RepoFile> files = filesIn(snapshot);
  const bool diffusers = fs::exists(snapshot / "model_index.json");
  Selection selection;
  try {
    selection = selectFiles(files, name, diffusers ? readFile(snapshot / "model_index.json") : "");
  } catch (const Error&) {
    return snap;  // not the files this name needs
  }
  if (!complete(snapshot, selection)) return snap;
  snap.commit = commit;
  snap.folder = snapshot;
  snap.kind = selection.kind;
  snap.gguf = selection.gguf;
  return snap;
}

Snapshot fetch(const ModelName& name, const Settings& settings, Freshness freshness) {
  if (settings.offline || freshness == Freshness::CachedFirst) {
    Snapshot cached = cachedSnapshot(name, settings);
    if (!cached.commit.empty()) return cached;
    if (settings.offline)
      throw Error("HF_HUB_OFFLINE is set and " + name.text() + " is not in the cache " + settings.cache.string() + " (" +
                  cachedList(settings) + ")");
  }
  const HttpClient http(settings.token);
  const std::string url = settings.endpoint + "/api/models/" + name.repo + "/revision/" + urlEncode(name.revision, false) + "?blobs=true";
  RepoInfo info;
  try {
    info = parseRepoInfo(http.get(url));
  } catch (const HttpError& e) {
    explain(e, name.repo + "@" + name.revision, settings);
  } catch (const UnreachableError& e) {
    unreachable(e, settings);
  }
  const fs::path folder = repoFolder(settings.cache, name.repo);
  const fs::path snapshot = folder / "snapshots" / info.commit;
  const Job job{http, settings, name.repo, info.commit};
  // A diffusers pipeline's components are named in its model_index.json: that file first.
  std::string modelIndex;
  const auto index = std::find_if(info.files.begin(), info.files.end(), [](const RepoFile& f) { return f.path == "model_index.json"; });
  if (index != info.files.end() && name.file.empty() && name.quant.empty()) {
    downloadAll(job, {*index});
    modelIndex = readFile(snapshot / "model_index.json");
  }
  const Selection selection = selectFiles(info.files, name, modelIndex);
  downloadAll(job, selection.files);
  writeRef(folder, name.revision, info.commit);
  Snapshot snap;
  snap.repo = name.repo;
  snap.commit = info.commit;
  snap.folder = snapshot;
  snap.kind = selection.kind;
  snap.gguf = selection.gguf;
  return snap;
}

}  // namespace gizml::hub
