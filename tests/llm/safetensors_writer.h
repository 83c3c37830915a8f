#pragma once
// Writing F32 safetensors files, for tests that derive a model from a fixture (an MTP layer
// added, projections zeroed). The format: an 8-byte little-endian header length, the JSON header
// {name: {dtype, shape, data_offsets}}, then the tensors' bytes.
#include <gizml/tensor.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

inline void writeSafetensors(const std::string& path, const std::map<std::string, gizml::tensor::Tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<float> data;
  for (const auto& [name, t] : tensors) {
    const std::vector<float> values = t.toFloats();
    header[name] = {{"dtype", "F32"},
                    {"shape", t.shape()},
                    {"data_offsets", {data.size() * 4, (data.size() + values.size()) * 4}}};
    data.insert(data.end(), values.begin(), values.end());
  }
  const std::string text = header.dump();
  const uint64_t length = text.size();
  std::ofstream out(path, std::ios::binary);
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((length >> (8 * i)) & 0xff));
  out << text;
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * 4));
}
