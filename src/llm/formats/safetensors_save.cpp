// saveSafetensors (gizml/safetensors.h): an 8-byte little-endian header length, the JSON header
// {name: {dtype, shape, data_offsets}} padded with spaces to a multiple of 8 bytes (so that every
// tensor's data starts as aligned as its offset), then the tensors' bytes in name order.
#include <gizml/error.h>
#include <gizml/safetensors.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "llm/formats/safetensors.h"

namespace gizml::llm {
namespace {

SafetensorsDType storedDType(DType dtype, const std::string& path, const std::string& name) {
  switch (dtype) {
    case DType::F32: return SafetensorsDType::F32;
    case DType::F16: return SafetensorsDType::F16;
    case DType::BF16: return SafetensorsDType::BF16;
    case DType::I8: return SafetensorsDType::I8;
    case DType::U8: return SafetensorsDType::U8;
    case DType::I32: return SafetensorsDType::I32;
    case DType::I64: return SafetensorsDType::I64;
    case DType::Bool: return SafetensorsDType::Bool;
    case DType::F64: return SafetensorsDType::F64;
    case DType::I4: break;
  }
  throw Error(path + ": tensor '" + name + "' is " + dtypeName(dtype) + ", which safetensors has no dtype for");
}

}  // namespace

void saveSafetensors(const std::string& path, const std::map<std::string, tensor::Tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<tensor::Tensor> data;  // host and contiguous, in name order
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    check(name != "__metadata__", path + ": a tensor cannot be named __metadata__ (the header's metadata)");
    const SafetensorsDType stored = storedDType(t.dtype(), path, name);
    const uint64_t bytes = dtypeBytes(t.dtype(), t.numel());
    header[name] = {{"dtype", safetensorsDTypeName(stored)}, {"shape", t.shape()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(t.host().contiguous());
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  check(out.is_open(), path + ": cannot be written");
  const uint64_t length = text.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((length >> (8 * i)) & 0xff));
  out << text;
  for (const tensor::Tensor& t : data)
    if (t.numel() > 0)
      out.write(static_cast<const char*>(t.rawData()), static_cast<std::streamsize>(dtypeBytes(t.dtype(), t.numel())));
  out.close();
  check(!out.fail(), path + ": writing failed");
}

}  // namespace gizml::llm
