#include "llm/tokenizer/gguf_vocab.h"

#include <gizml/error.h>

#include <cstring>
#include <string_view>

#include "core/mapped_file.h"

namespace gizml::llm {
namespace {

enum Type : uint32_t { U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 };

class Reader {
 public:
  Reader(const uint8_t* data, size_t size, const std::string& name) : p_(data), end_(data + size), name_(name) {}

  template <typename T>
  T read() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  std::string_view string() {
    const auto n = read<uint64_t>();
    need(n);
    std::string_view s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  void skip(uint32_t type) {
    switch (type) {
      case STRING: string(); return;
      case ARRAY: {
        const auto elementType = read<uint32_t>();
        const auto n = read<uint64_t>();
        check(elementType != ARRAY, name_ + ": nested GGUF arrays are not supported");
        if (elementType == STRING) {
          for (uint64_t i = 0; i < n; ++i) string();
        } else {
          const size_t width = scalarSize(elementType);
          need(n, width);
          p_ += n * width;
        }
        return;
      }
      default: {
        const size_t width = scalarSize(type);
        need(width);
        p_ += width;
      }
    }
  }
  // An integer of any integer type, as int64.
  int64_t integer(uint32_t type) {
    switch (type) {
      case U8: return read<uint8_t>();
      case I8: return read<int8_t>();
      case U16: return read<uint16_t>();
      case I16: return read<int16_t>();
      case U32: return read<uint32_t>();
      case I32: return read<int32_t>();
      case U64: return static_cast<int64_t>(read<uint64_t>());
      case I64: return read<int64_t>();
      default: throw Error(name_ + ": GGUF value is not an integer");
    }
  }
  // The element count of an array of the expected type, checked against the bytes left.
  uint64_t arrayOf(uint32_t type, uint32_t expected, std::string_view key) {
    check(type == ARRAY, name_ + ": " + std::string(key) + " is not an array");
    const auto elementType = read<uint32_t>();
    check(elementType == expected, name_ + ": " + std::string(key) + " has the wrong element type");
    const auto n = read<uint64_t>();
    need(n, expected == STRING ? sizeof(uint64_t) : scalarSize(expected));
    return n;
  }
  size_t scalarSize(uint32_t type) const {
    switch (type) {
      case U8: case I8: case BOOL: return 1;
      case U16: case I16: return 2;
      case U32: case I32: case F32: return 4;
      case U64: case I64: case F64: return 8;
      default: throw Error(name_ + ": unknown GGUF value type " + std::to_string(type));
    }
  }

 private:
  void need(uint64_t n, uint64_t width = 1) {
    const auto left = static_cast<uint64_t>(end_ - p_);
    check(width == 0 || n <= left / width, name_ + ": truncated GGUF metadata");
  }
  const uint8_t* p_;
  const uint8_t* end_;
  const std::string& name_;
};

}  // namespace

GgufVocab parseGgufVocab(const uint8_t* data, size_t size, const std::string& name) {
  Reader r(data, size, name);
  check(r.read<uint32_t>() == 0x46554747u, name + ": not a GGUF file");
  const auto version = r.read<uint32_t>();
  check(version == 2 || version == 3, name + ": unsupported GGUF version " + std::to_string(version));
  r.read<uint64_t>();  // tensor count
  const auto kvCount = r.read<uint64_t>();
  GgufVocab v;
  for (uint64_t i = 0; i < kvCount; ++i) {
    const std::string_view key = r.string();
    const auto type = r.read<uint32_t>();
    if (key == "tokenizer.ggml.model" || key == "tokenizer.ggml.pre") {
      check(type == STRING, name + ": " + std::string(key) + " is not a string");
      (key == "tokenizer.ggml.model" ? v.model : v.pre) = std::string(r.string());
    } else if (key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.merges") {
      auto& out = key == "tokenizer.ggml.tokens" ? v.tokens : v.merges;
      const uint64_t n = r.arrayOf(type, STRING, key);
      out.reserve(n);
      for (uint64_t k = 0; k < n; ++k) out.emplace_back(r.string());
    } else if (key == "tokenizer.ggml.scores") {
      const uint64_t n = r.arrayOf(type, F32, key);
      v.scores.reserve(n);
      for (uint64_t k = 0; k < n; ++k) v.scores.push_back(r.read<float>());
    } else if (key == "tokenizer.ggml.token_type") {
      const uint64_t n = r.arrayOf(type, I32, key);
      v.tokenTypes.reserve(n);
      for (uint64_t k = 0; k < n; ++k) v.tokenTypes.push_back(r.read<int32_t>());
    } else if (key == "tokenizer.ggml.bos_token_id" || key == "tokenizer.ggml.eos_token_id") {
      (key == "tokenizer.ggml.bos_token_id" ? v.bos : v.eos) = r.integer(type);
    } else if (key == "tokenizer.ggml.add_bos_token" || key == "tokenizer.ggml.add_eos_token" ||
               key == "tokenizer.ggml.add_space_prefix") {
      check(type == BOOL, name + ": " + std::string(key) + " is not a bool");
      const bool value = r.read<uint8_t>() != 0;
      (key == "tokenizer.ggml.add_bos_token" ? v.addBos
       : key == "tokenizer.ggml.add_eos_token" ? v.addEos : v.addSpacePrefix) = value;
    } else {
      r.skip(type);
    }
  }
  return v;
}

GgufVocab readGgufVocab(const std::string& path) {
  const core::MappedFile file(path);
  return parseGgufVocab(file.data(), file.size(), path);
}

}  // namespace gizml::llm
