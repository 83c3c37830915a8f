#pragma once
// The hub's own cache layout (huggingface_hub's), so that files either of us fetched serve both:
//   {cache}/models--{org}--{name}/blobs/{etag}             the bytes (etag: LFS sha256 or git blob id)
//   {cache}/models--{org}--{name}/snapshots/{commit}/{path} a relative symlink to its blob
//   {cache}/models--{org}--{name}/refs/{revision}          the commit a branch or tag pointed at
//   {cache}/.locks/models--{org}--{name}/{etag}.lock        held (flock) while a blob downloads
// Its reads (repoFolder, cachedCommit, cachedRepos, ...), removeSnapshot and FileLock are public
// (gizml/hub.h); here are the writes and locks of a download.
#include <gizml/hub.h>

#include <filesystem>
#include <string>

namespace gizml::hub {

/// Writes refs/{revision} = commit (renamed into place), unless revision is the commit itself.
void writeRef(const std::filesystem::path& repoFolder, const std::string& revision, const std::string& commit);

/// Makes snapshots/{commit}/{path} a relative symlink to blobs/{etag} (replacing what was there).
void linkSnapshotFile(const std::filesystem::path& repoFolder, const std::string& commit, const std::string& path,
                      const std::string& etag);

/// The lock file of one blob of repo.
std::filesystem::path blobLock(const std::filesystem::path& cache, const std::string& repo, const std::string& etag);

}  // namespace gizml::hub
