#pragma once
// A read-only memory map of a whole file; the bytes stay valid while the object lives.
#include <cstddef>
#include <cstdint>
#include <string>

namespace gizml::core {

class MappedFile {
 public:
  /// Maps path read-only; throws gizml::Error naming the path and the system's reason.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  /// Gives back the resident pages wholly inside [p, p + n) (a range of this map) once nothing
  /// needs them soon: they leave the process's memory and are read from the file again if
  /// touched. Ranges outside the map are ignored.
  void releasePages(const uint8_t* p, size_t n) const;
  /// Copies the n bytes at p (a range of this map) into `into` from the file, without mapping
  /// their pages into the process: where the page cache holds the file in large folios (2 MiB on
  /// kernel 6.18), a read through the map maps each folio whole, and a table read a few rows at a
  /// time comes to hold most of its pages. Throws gizml::Error naming the path if the range is not
  /// the map's or the file cannot be read.
  void copyOut(const uint8_t* p, size_t n, uint8_t* into) const;

 private:
  std::string path_;
  int fd_ = -1;  // kept open for copyOut
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace gizml::core
