#pragma once
// GGUF model files (versions 2 and 3, little-endian; llama.cpp ggml/docs/gguf.md): typed
// metadata, tensor infos checked against the file, raw tensor bytes and dequantization to F32.
// Every malformed input throws gizml::Error naming the file and the problem.
#include <gizml/tensor.h>

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "llm/formats/byte_source.h"
#include "llm/quant/ggml_types.h"

namespace gizml::llm {

enum class GgufValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8,
  Array = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* ggufValueTypeName(GgufValueType type);

/// One metadata value. Arrays of numbers or bools keep their little-endian bytes (a 150k-entry
/// token-type array stays compact); arrays of strings and of arrays hold parsed items.
struct GgufValue {
  GgufValueType type = GgufValueType::U8;
  uint64_t bits = 0;                        // numeric and bool scalars: the raw bits, widened
  std::string string;                       // String
  GgufValueType elementType = GgufValueType::U8;  // Array
  uint64_t count = 0;                       // Array: number of elements
  std::vector<uint8_t> raw;                 // Array of numbers or bools
  std::vector<std::string> strings;         // Array of strings
  std::vector<GgufValue> arrays;            // Array of arrays

  // Conversions; `what` names the value in the Error thrown for a wrong type or range.
  /// Any integer type; u64 values above INT64_MAX are an error.
  int64_t asInt(const std::string& what = "value") const;
  /// f32, f64 or an integer.
  double asFloat(const std::string& what = "value") const;
  bool asBool(const std::string& what = "value") const;
  const std::string& asString(const std::string& what = "value") const;
  std::vector<int64_t> asInts(const std::string& what = "value") const;
  std::vector<double> asFloats(const std::string& what = "value") const;
  const std::vector<std::string>& asStrings(const std::string& what = "value") const;
  /// "u32", "array of string", ...
  std::string typeText() const;
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ne[0] varies fastest (a weight's in_features)
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;      // from the start of the data section
  uint64_t bytes = 0;
  int64_t numel = 0;

  /// Row-major shape: ne reversed ([out, in] for a weight).
  tensor::Shape shape() const;
};

class GgufFile {
 public:
  /// Maps and checks the file.
  explicit GgufFile(const std::string& path);
  /// Checks bytes held in memory; `name` stands for the path in messages.
  GgufFile(std::vector<uint8_t> bytes, const std::string& name);

  const std::string& path() const { return source_.name(); }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  /// Byte offset of the data section in the file.
  uint64_t dataOffset() const { return dataOffset_; }

  /// Key-value pairs in file order.
  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  bool has(const std::string& key) const { return find(key) != nullptr; }
  const GgufValue* find(const std::string& key) const;
  /// The value of key; throws when it is missing.
  const GgufValue& value(const std::string& key) const;

  // Typed getters: throw when the key is missing or holds another type.
  std::string getString(const std::string& key) const;
  int64_t getInt(const std::string& key) const;
  double getFloat(const std::string& key) const;
  bool getBool(const std::string& key) const;
  std::vector<std::string> getStrings(const std::string& key) const;
  std::vector<int64_t> getInts(const std::string& key) const;
  std::vector<double> getFloats(const std::string& key) const;
  // The same with a fallback for a missing key (a wrong type still throws).
  std::string getString(const std::string& key, const std::string& fallback) const;
  int64_t getInt(const std::string& key, int64_t fallback) const;
  double getFloat(const std::string& key, double fallback) const;
  bool getBool(const std::string& key, bool fallback) const;

  /// Tensor infos in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* findTensor(const std::string& name) const;
  /// The info of a tensor; throws when there is none of that name.
  const GgufTensorInfo& tensor(const std::string& name) const;
  /// The tensor's stored bytes, valid while this file lives.
  std::span<const uint8_t> tensorBytes(const GgufTensorInfo& info) const;
  /// The tensor as a new F32 tensor of shape info.shape().
  tensor::Tensor dequantize(const GgufTensorInfo& info) const;
  tensor::Tensor dequantize(const std::string& name) const { return dequantize(tensor(name)); }

 private:
  void parse();
  std::string where(const std::string& key) const { return path() + ": " + key; }

  ByteSource source_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t dataOffset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::unordered_map<std::string, size_t> metadataIndex_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensorIndex_;
};

}  // namespace gizml::llm
