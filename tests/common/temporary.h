#pragma once
// Temporary files and folders of the tests, gone when the test program exits.
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace gizml::test {

/// A temporary path named by tag and this process (test programs run side by side), ending in
/// suffix (".safetensors"), removed with all it holds when the process exits (ctest runs each test
/// as a process of its own: thousands of such folders, 58 GB, had piled up in /tmp before). Only
/// the process that asked removes it: a forked child (a death test) that exits leaves it be.
inline std::string temporary(const std::string& tag, const std::string& suffix = "") {
  struct Made {
    std::mutex lock;
    std::vector<std::pair<pid_t, std::string>> paths;
    ~Made() {
      std::error_code ignored;
      for (const auto& [pid, p] : paths)
        if (pid == ::getpid()) std::filesystem::remove_all(p, ignored);
    }
  };
  static Made made;
  const pid_t pid = ::getpid();
  std::string path =
      (std::filesystem::temp_directory_path() / ("gizml_" + tag + "_" + std::to_string(pid) + suffix)).string();
  const std::lock_guard<std::mutex> hold(made.lock);
  made.paths.emplace_back(pid, path);
  return path;
}

}  // namespace gizml::test
