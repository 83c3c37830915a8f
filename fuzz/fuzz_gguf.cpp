// libFuzzer target: any bytes must open as a GGUF file or throw gizml::Error; a file that opens
// must read all its metadata and dequantize its (small) tensors without faults.
// Seed corpus: tests/data/gguf/writer.gguf.
#include <gizml/error.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "llm/formats/gguf.h"
#include "llm/quant/ggml_dequant.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gizml::llm;
  try {
    const GgufFile file(std::vector<uint8_t>(data, data + size), "fuzz.gguf");
    for (const GgufKeyValue& kv : file.metadata()) {
      const GgufValue& v = kv.value;
      try {  // wrong types throw; values of the right type must convert
        if (v.type == GgufValueType::Array) {
          v.asInts();
          v.asFloats();
        } else {
          v.asFloat();
        }
      } catch (const gizml::Error&) {
      }
    }
    for (const GgufTensorInfo& t : file.tensors()) {
      (void)file.tensorBytes(t);
      if (canDequantize(t.type) && t.numel <= (1 << 16)) file.dequantize(t);
    }
  } catch (const gizml::Error&) {
  }
  return 0;
}
