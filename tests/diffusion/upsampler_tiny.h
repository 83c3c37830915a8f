#pragma once
// The tiny Qwen3 of tests/reference/make_upsampler_fixtures.py as llm::convert's folder, for the
// upsampler's tests and giz paint --upsample's: the committed tensors written back into a Hugging
// Face folder with Qwen3's tokenizer (zimage_tiny.h), converted at 16 bits throughout (the
// reference is f32 on BF16 weights), once a process.
#include <gizml/llm.h>

#include <filesystem>
#include <string>

#include "diffusion/zimage_tiny.h"
#include "common/test_paths.h"

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

/// The tiny Qwen 3.5 with its vision tower of tests/reference/make_upsampler_vision_fixtures.py
/// as a Hugging Face folder at `hf` (made afresh), with Qwen3.5's chat template.
inline void writeVisionHf(const std::filesystem::path& hf) {
  zimage::writeTextHf(hf, {}, "upsampler_vl_tiny");
  std::filesystem::copy_file(test_paths::sharedData() + "/templates/Qwen3.5-4B.jinja", hf / "chat_template.jinja");
}

/// That model converted as modelFolder's; convert keeps the tower (FOLDER/vision).
inline const std::string& visionModelFolder() {
  static const std::string folder = [] {
    const std::string hf = test::temporary("upsampler_vl_hf"), out = test::temporary("upsampler_vl");
    writeVisionHf(hf);
    std::filesystem::remove_all(out);
    llm::convert(hf, out, llm::Bits{.layers = 16, .head = 16});
    return out;
  }();
  return folder;
}

}  // namespace gizml::test::upsampler
