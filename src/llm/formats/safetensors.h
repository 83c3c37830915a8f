#pragma once
// safetensors files (huggingface/safetensors): u64 header length, a JSON header naming each
// tensor's dtype, shape and data_offsets (plus optional __metadata__), then the bytes. The
// header is checked as the reference crate checks it: offsets contiguous from 0 to the end of
// the file, sizes equal to shape times dtype size. Bad input throws gizml::Error naming the file.
// Reading and writing whole files is public (gizml/safetensors.h).
#include <gizml/safetensors.h>
#include <gizml/tensor.h>

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "llm/formats/byte_source.h"

namespace gizml::llm {

enum class SafetensorsDType : uint8_t {
  Bool, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64,
};
/// The name in headers: "F32", "BF16", "F8_E4M3", ...
const char* safetensorsDTypeName(SafetensorsDType dtype);
size_t safetensorsDTypeSize(SafetensorsDType dtype);
/// The gizml dtype load() gives: the same where gizml has it, else a wider one (F64 and F8 to
/// F32, I16 and U16 to I32, U32 and U64 to I64).
DType loadedDType(SafetensorsDType dtype);

struct SafetensorsTensorInfo {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::F32;
  tensor::Shape shape;
  uint64_t begin = 0;  // data_offsets, from the start of the data section
  uint64_t end = 0;
  int64_t numel = 0;
};

class SafetensorsFile {
 public:
  /// Maps and checks the file.
  explicit SafetensorsFile(const std::string& path);
  /// Checks bytes held in memory; `name` stands for the path in messages.
  SafetensorsFile(std::vector<uint8_t> bytes, const std::string& name);

  const std::string& path() const { return source_.name(); }
  /// The header's __metadata__ (string to string), empty when absent.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// Tensor infos in the order of their data.
  const std::vector<SafetensorsTensorInfo>& tensors() const { return tensors_; }
  const SafetensorsTensorInfo* findTensor(const std::string& name) const;
  /// The info of a tensor; throws when there is none of that name.
  const SafetensorsTensorInfo& tensor(const std::string& name) const;
  /// The tensor's stored bytes (little-endian), valid while this file lives.
  std::span<const uint8_t> tensorBytes(const SafetensorsTensorInfo& info) const;
  /// The tensor as a new contiguous gizml tensor of dtype loadedDType(info.dtype).
  tensor::Tensor load(const SafetensorsTensorInfo& info) const;
  tensor::Tensor load(const std::string& name) const { return load(tensor(name)); }
  /// Lets the system drop the tensor's mapped pages (after load made a copy); they are read from
  /// the file again if needed.
  void releasePages(const SafetensorsTensorInfo& info) const {
    const std::span<const uint8_t> bytes = tensorBytes(info);
    source_.releasePages(bytes.data(), bytes.size());
  }

 private:
  void parse();

  ByteSource source_;
  uint64_t dataOffset_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace gizml::llm
