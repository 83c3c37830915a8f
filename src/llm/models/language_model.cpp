#include "llm/language_model.h"

#include <gizml/error.h>

#include <cstdio>
#include <string>

#include "llm/models/families.h"
#include "llm/quant/converted_model.h"

namespace gizml::llm {

tensor::Tensor LanguageModel::hidden(const std::vector<int32_t>&) const {
  throw Error("hidden: this model gives logits only, not its hidden states");
}

std::unique_ptr<LanguageModel> buildLanguageModel(const ConvertedModel& weights) {
  return buildLanguageModel(weights, ModelOptions{});
}

std::unique_ptr<LanguageModel> buildLanguageModel(const ConvertedModel& stored, const ModelOptions& options) {
  if (options.gpu) {
    // The stored weights bound what the layers upload (embeddings stay in the file): a model that
    // cannot fit is an Error naming both sizes before anything is copied.
    uint64_t bytes = 0;
    for (const StoredTensor& t : stored.tensors()) bytes += stored.raw(t).size();
    const uint64_t free = options.gpu->freeBytes();
    const auto mib = [](uint64_t b) {
      char text[32];
      std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(b) / (1 << 20));
      return std::string(text);
    };
    check(bytes <= free, stored.folder() + ": its weights take " + mib(bytes) + ", more than the " + mib(free) +
                             " free on " + options.gpu->describe());
  }
  const ConvertedModel weights = options.gpu ? stored.placedOn(*options.gpu) : stored;
  switch (weights.config().architecture) {
    case Architecture::Llama:
    case Architecture::Mistral:
    case Architecture::Qwen2:
    case Architecture::Qwen3:
    case Architecture::Qwen3VLText:
      return buildLlama(weights, options);
    case Architecture::Gemma3Text:
      return buildGemma3(weights, options);
    case Architecture::Qwen3_5Text:
    case Architecture::Qwen3_5MoeText:
      return buildQwen35(weights, options);
    default:
      throw Error(weights.folder() + ": no CPU model for architecture " +
                  architectureName(weights.config().architecture) + " yet");
  }
}

}  // namespace gizml::llm
