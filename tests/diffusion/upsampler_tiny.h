#pragma once
// The tiny Qwen3 of tests/reference/make_upsampler_fixtures.py as llm::convert's folder, for the
// upsampler's tests and giz paint --upsample's: the committed tensors written back into a Hugging
// Face folder with Qwen3's tokenizer (zimage_tiny.h), converted at 16 bits throughout (the
// reference is f32 on BF16 weights), once a process.
#include <gizml/llm.h>

#include <filesystem>
#include <string>

#include "diffusion/zimage_tiny.h"

namespace gizml::test::upsampler {

inline const std::string& modelFolder() {
  static const std::string folder = [] {
    const std::string hf = test::temporary("upsampler_hf"), out = test::temporary("upsampler");
    zimage::writeTextHf(hf, {}, "upsampler_tiny");
    std::filesystem::remove_all(out);
    llm::convert(hf, out, llm::Bits{.layers = 16, .head = 16});
    return out;
  }();
  return folder;
}

}  // namespace gizml::test::upsampler
