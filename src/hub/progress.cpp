#include "hub/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace gizml::hub {

namespace {

std::string duration(double seconds) {
  if (!(seconds >= 0) || seconds > 360000) return "--:--";
  const int s = static_cast<int>(seconds + 0.5);
  char text[32];
  std::snprintf(text, sizeof text, s >= 3600 ? "%d:%02d:%02d" : "%d:%02d", s >= 3600 ? s / 3600 : s / 60,
                s >= 3600 ? s / 60 % 60 : s % 60, s % 60);
  return text;
}

}  // namespace

std::string humanBytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return text;
}

DownloadProgress::DownloadProgress(std::vector<std::pair<std::string, int64_t>> files)
    : terminal_(isatty(2) == 1), start_(std::chrono::steady_clock::now()), lastDraw_(start_) {
  for (auto& [name, size] : files) files_.push_back({name, size});
  if (!terminal_)
    for (const File& f : files_) std::cerr << "download: " << f.name << " (" << (f.size >= 0 ? humanBytes(double(f.size)) : "size unknown") << ")\n";
}

std::string DownloadProgress::line(const File& f) const {
  std::ostringstream out;
  out << (f.done ? "done " : "     ") << f.name << "  " << humanBytes(double(f.bytes));
  if (f.size > 0) out << " / " << humanBytes(double(f.size)) << "  " << (100 * f.bytes / f.size) << " %";
  return out.str();
}

std::string DownloadProgress::totalLine() const {
  int64_t bytes = 0, size = 0, fresh = 0;
  for (const File& f : files_) {
    bytes += f.bytes;
    size += std::max<int64_t>(f.size, f.bytes);
    fresh += f.bytes - std::max<int64_t>(f.startBytes, 0);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double speed = seconds > 0 ? double(fresh) / seconds : 0;
  std::ostringstream out;
  out << "total " << humanBytes(double(bytes)) << " / " << humanBytes(double(size)) << "  " << humanBytes(speed)
      << "/s  " << duration(seconds) << " elapsed, " << (speed > 0 ? duration(double(size - bytes) / speed) : "--:--") << " left";
  return out.str();
}

void DownloadProgress::draw() {
  std::string text;
  if (drawn_) text += "\x1b[" + std::to_string(files_.size() + 1) + "A";  // back to the first line
  for (const File& f : files_) text += "\r\x1b[2K" + line(f) + "\n";
  text += "\r\x1b[2K" + totalLine() + "\n";
  std::cerr << text << std::flush;
  drawn_ = true;
  lastDraw_ = std::chrono::steady_clock::now();
}

void DownloadProgress::update(size_t index, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  File& f = files_.at(index);
  if (f.startBytes < 0) f.startBytes = bytes;
  f.bytes = bytes;
  if (terminal_) {
    if (std::chrono::steady_clock::now() - lastDraw_ > std::chrono::milliseconds(100)) draw();
  } else if (f.size > 0) {
    const int step = static_cast<int>(10 * bytes / f.size);
    if (step > f.logged && step < 10) {
      if (f.logged >= 0) std::cerr << "download: " << f.name << " " << step * 10 << " %\n";
      f.logged = step;
    }
  }
}

void DownloadProgress::done(size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  File& f = files_.at(index);
  f.done = true;
  if (f.size >= 0) f.bytes = f.size;
  if (terminal_) draw();
  else std::cerr << "download: " << f.name << " done\n";
}

void DownloadProgress::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (terminal_) draw();
  else std::cerr << "download: " << totalLine() << "\n";
}

}  // namespace gizml::hub
