// libFuzzer target: any bytes, as a diffusion model's safetensors file (diffusion::WeightFile),
// give every weight as stored and in F32 or throw gizml::Error: ComfyUI's FP8 scales, INT8 and
// W4A8 codes, scales and comfy_quant JSON included (a layer's markers taken with its weight). A
// 2-D weight is also asked for at the logical shapes of 4- and 6-bit packed codes.
// Seed corpus: the INT8, W4A8 and FP8 layer files of tests/data/diffusion/.
#include <gizml/error.h>

#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>
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
      std::vector<gizml::T::Shape> shapes = {t.shape};
      if (t.shape.size() == 2) {
        shapes.push_back({t.shape[0], 2 * t.shape[1]});
        shapes.push_back({t.shape[0], t.shape[1] * 4 / 3});
      }
      for (const gizml::T::Shape& shape : shapes) {
        try {
          file.takeStored(t.name, shape).f32();
        } catch (const gizml::Error&) {
        }
      }
    }
  } catch (const gizml::Error&) {
  }
  std::remove(path.c_str());  // the file is unmapped by now; nothing is left in /tmp
  return 0;
}
