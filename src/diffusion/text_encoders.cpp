// The diffusion models' text encoders in our format: the first layers of Qwen3 models, converted
// with gizml::llm (convertZImageText, convertTextEncoder).
#include <gizml/diffusion.h>
#include <gizml/error.h>

#include <algorithm>
#include <string>

#include "llm/convert_source.h"

namespace gizml::diffusion {
namespace {

// source's layer count, once its architecture is one `who` reads (named in the Error otherwise).
int64_t sourceLayers(const std::string& source, const std::string& who,
                     std::initializer_list<llm::Architecture> accepted) {
  const std::unique_ptr<llm::WeightSource> src = llm::openWeightSource(source);
  const llm::ModelConfig& config = src->config();
  std::string names;
  for (llm::Architecture a : accepted) names += std::string(names.empty() ? "" : " or ") + llm::architectureName(a);
  check(std::find(accepted.begin(), accepted.end(), config.architecture) != accepted.end(),
        source + ": " + who + " is " + names + ", not " + llm::architectureName(config.architecture));
  return config.numLayers;
}

// The embedding and the first `layers` layers, at 16 bits: the states go straight into the DiT
// (diffusion.h, convertZImageText, says why).
llm::ConvertReport convertFirstLayers(const std::string& source, const std::string& destination, int64_t layers) {
  return llm::convert(source, destination, llm::Bits{.layers = 16, .head = 16}, "", layers);
}

}  // namespace

llm::ConvertReport convertZImageText(const std::string& source, const std::string& destination) {
  const int64_t layers = sourceLayers(source, "Z-Image's text encoder (Qwen3-4B)", {llm::Architecture::Qwen3});
  check(layers >= 2, source + ": Z-Image reads the states before the last layer; the model has " +
                         std::to_string(layers) + " layer(s)");
  return convertFirstLayers(source, destination, layers - 1);
}

llm::ConvertReport convertTextEncoder(const std::string& source, const std::string& destination,
                                      const std::vector<int64_t>& layers) {
  check(!layers.empty(), "convertTextEncoder: no hidden states asked for");
  for (int64_t l : layers)
    check(l >= 1, "convertTextEncoder: hidden state " + std::to_string(l) + " is not after a layer (1 or more)");
  const int64_t last = *std::max_element(layers.begin(), layers.end());
  const int64_t held = sourceLayers(source, "a text encoder (klein's Qwen3-4B, or Qwen3-VL's language model)",
                                    {llm::Architecture::Qwen3, llm::Architecture::Qwen3VLText});
  check(last <= held, source + ": the hidden state after layer " + std::to_string(last) +
                          " is asked for and the model has " + std::to_string(held) + " layers");
  return convertFirstLayers(source, destination, last);
}

}  // namespace gizml::diffusion
