#pragma once
// Download progress on stderr: on a terminal one line per file and a total (bytes, speed, time
// left), redrawn in place; otherwise quiet log lines (start, every 10 %, done). Sizes are
// written by humanBytes (gizml/hub.h).
#include <gizml/hub.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace gizml::hub {

class DownloadProgress {
 public:
  /// files: name and size in bytes (-1 when not known) of each download.
  explicit DownloadProgress(std::vector<std::pair<std::string, int64_t>> files);
  /// File index has bytes of its size (called from the downloading threads).
  void update(size_t index, int64_t bytes);
  /// File index is complete.
  void done(size_t index);
  /// The last redraw and the total; called once, after the downloads.
  void finish();

 private:
  struct File {
    std::string name;
    int64_t size;
    int64_t bytes = 0;
    int64_t startBytes = -1;  // what a resumed download already had
    int logged = -1;          // the last 10 % step logged
    bool done = false;
  };
  void draw();  // terminal: every line again
  std::string line(const File& f) const;
  std::string totalLine() const;

  std::mutex mutex_;
  std::vector<File> files_;
  bool terminal_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, lastDraw_;
};

}  // namespace gizml::hub
