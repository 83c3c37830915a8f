#pragma once
// The tiny FLUX.2 [klein] of tests/reference/make_klein_pipeline_fixtures.py as the pipeline, the
// server tests, the server fuzzer and the command-line tests load it: the tiny text encoder of
// make_klein_text_fixtures.py written back into a Hugging Face folder and converted by
// convertTextEncoder, the DiT and the VAE of tests/data/diffusion, and the fixture's 70 x 66
// reference picture. Reads them through test_paths.h.
#include <gizml/diffusion.h>
#include <gizml/image.h>
#include <gizml/safetensors.h>

#include <filesystem>
#include <string>

#include "zimage_tiny.h"

namespace gizml::test::klein {

using zimage::data;

/// make_klein_text_fixtures.py's PROMPTS, the text to image's and the edit's.
inline const std::string kTextPrompt = "A red fox in fresh snow, watercolor";
inline const std::string kEditPrompt =
    "Ein Leuchtturm bei Nacht, 35 mm film grain; \u00abneon\u00bb signs reading 'OPEN 24/7'";

inline std::string ditPath() { return data("klein_pipeline_dit.safetensors"); }
inline std::string vaePath() { return data("flux2_vae_tiny.safetensors"); }

/// The fixture's tensors (klein_pipeline_case.safetensors).
inline const std::map<std::string, tensor::Tensor>& fixture() {
  static const auto c = llm::loadSafetensors(data("klein_pipeline_case.safetensors"));
  return c;
}

/// convertTextEncoder's folder of the tiny encoder, made once a process.
inline const std::string& textFolder() {
  static const std::string folder = [] {
    const std::string hf = test::temporary("klein_pipeline_text_hf");
    zimage::writeTextHf(hf, {}, "klein_text_tiny");
    const std::string out = test::temporary("klein_pipeline_text");
    std::filesystem::remove_all(out);
    diffusion::convertTextEncoder(hf, out);
    return out;
  }();
  return folder;
}

inline diffusion::KleinPipeline loaded(const diffusion::KleinPipelineConfig& config) {
  return diffusion::KleinPipeline::load(ditPath(), vaePath(), textFolder(), config);
}

/// Without the step cache: diffusers' pipeline, the reference, has none.
inline const diffusion::KleinPipeline& pipeline() {
  static const diffusion::KleinPipeline p = [] {
    diffusion::KleinPipelineConfig config;
    config.cache = 0;
    return loaded(config);
  }();
  return p;
}

/// A reference picture, the fixture's U8 [H, W, 3]: "picture" (70 x 66, the edit's) or
/// "edits_picture1" (72 x 64, the two-picture edit's second).
inline image::Image picture(const std::string& name = "picture") {
  const tensor::Tensor& t = fixture().at(name);
  const std::vector<float> v = t.toFloats();
  return {t.shape()[1], t.shape()[0], std::vector<uint8_t>(v.begin(), v.end())};
}

}  // namespace gizml::test::klein
