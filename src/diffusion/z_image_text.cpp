// convertZImageText: Qwen3-4B's first layers in our format, Z-Image's text encoder.
#include <gizml/diffusion.h>
#include <gizml/error.h>

#include <string>

#include "llm/convert_source.h"

namespace gizml::diffusion {

llm::ConvertReport convertZImageText(const std::string& source, const std::string& destination) {
  int64_t layers = 0;
  {
    const std::unique_ptr<llm::WeightSource> src = llm::openWeightSource(source);
    const llm::ModelConfig& config = src->config();
    check(config.architecture == llm::Architecture::Qwen3,
          source + ": Z-Image's text encoder is Qwen3-4B (qwen3), not " +
              llm::architectureName(config.architecture));
    check(config.numLayers >= 2, source + ": Z-Image reads the states before the last layer; the model has " +
                                     std::to_string(config.numLayers) + " layer(s)");
    layers = config.numLayers - 1;
  }
  // 16 bits: the states go straight into the DiT (diffusion.h says why).
  return llm::convert(source, destination, llm::Bits{.layers = 16, .head = 16}, "", layers);
}

}  // namespace gizml::diffusion
