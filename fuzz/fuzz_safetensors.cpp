// libFuzzer target: any bytes must open as a safetensors file or throw gizml::Error; a file
// that opens must load every tensor without faults.
// Seed corpus: tests/data/safetensors/.
#include <gizml/error.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "llm/formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gizml::llm;
  try {
    const SafetensorsFile file(std::vector<uint8_t>(data, data + size), "fuzz.safetensors");
    for (const SafetensorsTensorInfo& t : file.tensors()) file.load(t);
  } catch (const gizml::Error&) {
  }
  return 0;
}
