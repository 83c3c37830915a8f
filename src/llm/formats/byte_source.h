#pragma once
// The bytes of a model file: a read-only memory map, or an owned copy (tests and fuzzing open
// bytes that are not on disk). Copies share the bytes.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gizml::core {
class MappedFile;
}

namespace gizml::llm {

class ByteSource {
 public:
  /// Maps the file; throws gizml::Error naming it when it cannot.
  static ByteSource map(const std::string& path);
  /// Owns `bytes`; `name` stands for the path in error messages.
  static ByteSource own(std::vector<uint8_t> bytes, std::string name);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  /// Lets the system drop the mapped pages wholly inside [p, p + n) once copied (they are read
  /// from the file again if touched); nothing for owned bytes.
  void releasePages(const uint8_t* p, size_t n) const;

 private:
  std::shared_ptr<const void> owner_;
  const core::MappedFile* mapped_ = nullptr;  // owner_ when mapped
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
};

}  // namespace gizml::llm
