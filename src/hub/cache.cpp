#include "hub/cache.h"

#include <gizml/error.h>
#include <sys/file.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>

#include "hub/names.h"
#include "hub/repo_info.h"

namespace fs = std::filesystem;

namespace gizml::hub {

namespace {

std::string folderName(const std::string& repo) {
  std::string name = "models--" + repo;
  const size_t slash = name.find('/');
  if (slash != std::string::npos) name.replace(slash, 1, "--");
  return name;
}

std::string readText(const fs::path& file) {
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// The blobs that the symlinks under folder point at.
void linkedBlobs(const fs::path& folder, std::set<std::string>& blobs) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(folder, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_symlink()) blobs.insert(fs::read_symlink(it->path()).filename().string());
}

}  // namespace

fs::path repoFolder(const fs::path& cache, const std::string& repo) { return cache / folderName(repo); }

std::string cachedCommit(const fs::path& folder, const std::string& revision) {
  if (isGitHash(revision)) return revision;
  const std::string commit = readText(folder / "refs" / revision);
  return isGitHash(commit) ? commit : "";
}

void writeRef(const fs::path& folder, const std::string& revision, const std::string& commit) {
  if (revision == commit) return;
  const fs::path ref = folder / "refs" / revision;
  fs::create_directories(ref.parent_path());
  const fs::path partial = ref.string() + "." + std::to_string(getpid()) + ".partial";
  {
    std::ofstream out(partial);
    out << commit;
    if (!out) throw Error(ref.string() + ": cannot write");
  }
  fs::rename(partial, ref);
}

void linkSnapshotFile(const fs::path& folder, const std::string& commit, const std::string& path, const std::string& etag) {
  const fs::path link = folder / "snapshots" / commit / path;
  fs::create_directories(link.parent_path());
  // Relative, as huggingface_hub makes them: ../../blobs/{etag} from snapshots/{commit}/, one more ../ per folder of path.
  fs::path target = "../..";
  for (const char c : path)
    if (c == '/') target /= "..";
  target /= fs::path("blobs") / etag;
  const fs::path partial = link.string() + "." + std::to_string(getpid()) + ".link";
  std::error_code ec;
  fs::remove(partial, ec);
  fs::create_symlink(target, partial);
  fs::rename(partial, link);
}

FileLock::FileLock(const fs::path& file, const std::string& what) {
  fs::create_directories(file.parent_path());
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(file.string() + ": cannot open the lock file: " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  std::cerr << "waiting for another process that is downloading or converting " << what << "\n";
  while (::flock(fd_, LOCK_EX) != 0)
    if (errno != EINTR) {
      ::close(fd_);
      throw Error(file.string() + ": cannot lock: " + std::strerror(errno));
    }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

fs::path blobLock(const fs::path& cache, const std::string& repo, const std::string& etag) {
  return cache / ".locks" / folderName(repo) / (etag + ".lock");
}

std::vector<CachedRepo> cachedRepos(const fs::path& cache) {
  std::vector<CachedRepo> repos;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(cache, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("models--", 0) != 0) continue;
    const std::string rest = name.substr(8);
    const size_t split = rest.find("--");
    if (split == std::string::npos) continue;
    CachedRepo r;
    r.repo = rest.substr(0, split) + "/" + rest.substr(split + 2);
    std::error_code inner;
    for (auto it = fs::recursive_directory_iterator(e.path() / "refs", inner); !inner && it != fs::recursive_directory_iterator(); it.increment(inner))
      if (it->is_regular_file()) r.refs[it->path().lexically_relative(e.path() / "refs").generic_string()] = readText(it->path());
    for (const fs::directory_entry& s : fs::directory_iterator(e.path() / "snapshots", inner))
      if (s.is_directory()) r.snapshots.push_back(s.path().filename().string());
    for (const fs::directory_entry& b : fs::directory_iterator(e.path() / "blobs", inner))
      if (b.is_regular_file()) r.bytes += static_cast<int64_t>(b.file_size());
    repos.push_back(std::move(r));
  }
  std::sort(repos.begin(), repos.end(), [](const CachedRepo& a, const CachedRepo& b) { return a.repo < b.repo; });
  return repos;
}

std::string cachedNames(const fs::path& cache) {
  std::string text;
  for (const CachedRepo& r : cachedRepos(cache))
    if (!r.snapshots.empty()) text += (text.empty() ? "" : ", ") + r.repo;
  return text.empty() ? "none" : text;
}

int64_t removeSnapshot(const fs::path& cache, const std::string& repo, const std::string& commit) {
  const fs::path folder = repoFolder(cache, repo);
  fs::remove_all(folder / "snapshots" / commit);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(folder / "refs", ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file() && readText(it->path()) == commit) fs::remove(it->path());
  std::set<std::string> kept;
  linkedBlobs(folder / "snapshots", kept);
  int64_t freed = 0;
  for (const fs::directory_entry& b : fs::directory_iterator(folder / "blobs", ec))
    if (!kept.count(b.path().filename().string())) {
      if (b.is_regular_file()) freed += static_cast<int64_t>(b.file_size());
      fs::remove(b.path());
    }
  if (fs::is_empty(folder / "snapshots", ec) || !fs::exists(folder / "snapshots")) {
    fs::remove_all(folder);
    fs::remove_all(cache / ".locks" / folderName(repo));
  }
  return freed;
}

}  // namespace gizml::hub
