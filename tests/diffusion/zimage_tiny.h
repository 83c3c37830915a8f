#pragma once
// The tiny Z-Image Turbo of tests/reference/make_zimage_pipeline_fixtures.py as the pipeline,
// the server tests, the server fuzzer and the command-line tests load it: the text encoder's
// committed tensors written back into a Hugging Face folder (and converted by convertZImageText),
// the DiT and the VAE of tests/data/diffusion. Reads them through test_paths.h.
#include <gizml/diffusion.h>
#include <gizml/safetensors.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

// Relative: fuzz/fuzz_server.cpp includes this header with src/ alone on its include path.
#include "../common/temporary.h"
#include "../common/test_paths.h"

namespace gizml::test::zimage {

/// The prompt of the fixtures and of the golden picture.
inline const std::string kPrompt = "A red fox in fresh snow, watercolor";

inline std::string data(const std::string& name) { return test_paths::testData() + "/diffusion/" + name; }

inline void copyTokenizer(const std::filesystem::path& folder) {
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(test_paths::sharedData() + "/tokenizers/qwen3/" + file, folder / file,
                               std::filesystem::copy_options::overwrite_existing);
}

/// A tiny encoder (tests/data/diffusion/<fixture>: zimage_text_tiny, klein_text_tiny of
/// make_klein_text_fixtures.py, or h3_text_tiny, a Qwen3-VL, of make_h3_pipeline_fixtures.py) as a Hugging Face folder at `folder` (made afresh): the committed
/// tensors, the embedding written back from its non-zero rows, and Qwen3's tokenizer. edit may
/// change config.json first.
inline void writeTextHf(const std::filesystem::path& folder, const std::function<void(nlohmann::json&)>& edit = {},
                        const std::string& fixture = "zimage_text_tiny") {
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(data(fixture + "/config.json")));
  if (edit) edit(config);
  std::ofstream(folder / "config.json") << config.dump(2);
  std::map<std::string, T::Tensor> w = llm::loadSafetensors(data(fixture + "/weights.safetensors"));
  // Qwen3-VL (make_h3_pipeline_fixtures.py) holds its language model's sizes and names apart.
  const bool vision = config.contains("text_config");
  const nlohmann::json& sizes = vision ? config["text_config"] : config;
  const int64_t vocab = sizes["vocab_size"], hidden = sizes["hidden_size"];
  T::Tensor embed = T::zeros({vocab, hidden});
  const T::Tensor ids = w.at("embed_ids").contiguous();
  const std::vector<float> rows = w.at("embed_rows").toFloats();
  for (int64_t r = 0; r < ids.shape()[0]; ++r)
    std::copy_n(rows.begin() + r * hidden, hidden, embed.data<float>() + ids.data<int64_t>()[r] * hidden);
  w.erase("embed_ids");
  w.erase("embed_rows");
  w[vision ? "model.language_model.embed_tokens.weight" : "model.embed_tokens.weight"] = embed;
  llm::saveSafetensors((folder / "model.safetensors").string(), w);
  copyTokenizer(folder);
}

/// writeTextHf into a temporary folder named by tag; its path.
inline std::string textHf(const std::string& tag, const std::function<void(nlohmann::json&)>& edit = {}) {
  const std::filesystem::path folder = test::temporary("zimage_text_hf_" + tag);
  writeTextHf(folder, edit);
  return folder.string();
}

/// convertZImageText's folder of the tiny encoder, made once a process.
inline const std::string& textFolder() {
  static const std::string folder = [] {
    const std::string out = test::temporary("zimage_text");
    std::filesystem::remove_all(out);
    diffusion::convertZImageText(textHf("base"), out);
    return out;
  }();
  return folder;
}

/// The tiny DiT's RoPE axes (make_dit_fixtures.py's); the rest is Z-Image Turbo's.
inline diffusion::ZImagePipelineConfig config() {
  diffusion::ZImagePipelineConfig c;
  c.dit.ropeAxes = {4, 8, 12};
  return c;
}

inline const diffusion::ZImagePipeline& pipeline() {
  static const diffusion::ZImagePipeline p =
      diffusion::ZImagePipeline::load(data("dit_tiny.safetensors"), textFolder(), data("vae_tiny8.safetensors"), config());
  return p;
}

}  // namespace gizml::test::zimage
