#pragma once
// The hub's own cache layout (huggingface_hub's), so that files either of us fetched serve both:
//   {cache}/models--{org}--{name}/blobs/{etag}             the bytes (etag: LFS sha256 or git blob id)
//   {cache}/models--{org}--{name}/snapshots/{commit}/{path} a relative symlink to its blob
//   {cache}/models--{org}--{name}/refs/{revision}          the commit a branch or tag pointed at
//   {cache}/.locks/models--{org}--{name}/{etag}.lock        held (flock) while a blob downloads
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace gizml::hub {

/// The folder of repo ("org/name") in cache.
std::filesystem::path repoFolder(const std::filesystem::path& cache, const std::string& repo);

/// The commit refs/{revision} holds, or "" when it is not there. A 40-hex revision is its own commit.
std::string cachedCommit(const std::filesystem::path& repoFolder, const std::string& revision);

/// Writes refs/{revision} = commit (renamed into place), unless revision is the commit itself.
void writeRef(const std::filesystem::path& repoFolder, const std::string& revision, const std::string& commit);

/// Makes snapshots/{commit}/{path} a relative symlink to blobs/{etag} (replacing what was there).
void linkSnapshotFile(const std::filesystem::path& repoFolder, const std::string& commit, const std::string& path,
                      const std::string& etag);

/// An exclusive flock on a file, held until destruction. When another process holds it, says so
/// on stderr (naming what) and waits.
class FileLock {
 public:
  FileLock(const std::filesystem::path& file, const std::string& what);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

/// The lock file of one blob of repo.
std::filesystem::path blobLock(const std::filesystem::path& cache, const std::string& repo, const std::string& etag);

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

}  // namespace gizml::hub
