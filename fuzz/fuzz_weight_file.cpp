// libFuzzer target: any bytes, as a diffusion model's safetensors file (diffusion::WeightFile),
// give every weight as stored and in F32 or throw gizml::Error: ComfyUI's FP8 scales and INT8
// codes, scales and comfy_quant JSON included (a layer's markers taken with its weight).
// Seed corpus: the INT8 and FP8 layer files of tests/data/diffusion/.
#include <gizml/error.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <unistd.h>

#include "diffusion/weight_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // WeightFile maps a file: the input goes through one of this process's own.
  static const std::string path = "/tmp/gizml_fuzz_weight_file_" + std::to_string(getpid()) + ".safetensors";
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);
  try {
    gizml::diffusion::WeightFile file(path, "", "a fuzzed model");
    const gizml::llm::SafetensorsFile names(path);
    for (const gizml::llm::SafetensorsTensorInfo& t : names.tensors()) {
      if (!t.name.ends_with(".weight")) continue;
      try {
        file.takeStored(t.name, t.shape).f32();
      } catch (const gizml::Error&) {
      }
    }
  } catch (const gizml::Error&) {
  }
  return 0;
}
