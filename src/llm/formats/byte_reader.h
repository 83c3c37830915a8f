#pragma once
// A cursor over untrusted little-endian bytes: every read checks the bounds first and throws
// gizml::Error naming the file, the offset and what was being read.
#include <gizml/error.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace gizml::llm {

static_assert(std::endian::native == std::endian::little, "model files are read in place");

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, const std::string& name)
      : data_(data), size_(size), name_(name) {}

  size_t position() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  const std::string& name() const { return name_; }

  [[noreturn]] void fail(const std::string& problem) const {
    throw Error(name_ + ": " + problem + " (at byte " + std::to_string(pos_) + ")");
  }

  /// Makes sure n more bytes exist before reading `what`.
  void need(uint64_t n, const char* what) const {
    if (n > remaining()) {
      fail(std::string("truncated: ") + what + " needs " + std::to_string(n) + " bytes, " +
           std::to_string(remaining()) + " left");
    }
  }

  template <class T>
  T read(const char* what) {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));  // the host is little-endian, as GGUF is
    pos_ += sizeof(T);
    return value;
  }

  /// n bytes in place (valid while the source lives).
  const uint8_t* bytes(uint64_t n, const char* what) {
    need(n, what);
    const uint8_t* p = data_ + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& name_;
};

}  // namespace gizml::llm
