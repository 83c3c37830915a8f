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

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace gizml::core
