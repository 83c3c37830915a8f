#include "llm/language_model.h"

#include <gizml/error.h>

#include <cstdio>
#include <memory>
#include <string>

#include "core/page_memory.h"
#include "llm/models/families.h"
#include "llm/ops/gpu/weight_upload.h"
#include "llm/quant/converted_model.h"

namespace gizml::llm {

int64_t LanguageModel::poolMemory() const { return core::availableMemory(); }

tensor::Tensor LanguageModel::hidden(const std::vector<int32_t>&, const std::vector<int64_t>&, int64_t) const {
  throw Error("hidden: this model gives logits only, not its hidden states");
}

std::unique_ptr<LanguageModel> buildLanguageModel(const ConvertedModel& weights) {
  return buildLanguageModel(weights, ModelOptions{});
}

namespace {

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

/// The stored bytes of layers [first, end), and with `rest` those of every tensor outside the
/// layers (embeddings, final norm, output and MTP layers: the last stage's).
uint64_t storedBytes(const ConvertedModel& stored, int64_t first, int64_t end, bool rest) {
  uint64_t bytes = 0;
  for (const StoredTensor& t : stored.tensors()) {
    const std::string prefix = "model.layers.";
    const bool layer = t.name.rfind(prefix, 0) == 0;
    const int64_t index = layer ? std::stoll(t.name.substr(prefix.size())) : -1;
    if (layer ? (index >= first && index < end) : rest) bytes += stored.raw(t).size();
  }
  return bytes;
}

std::unique_ptr<LanguageModel> buildArchitecture(const ConvertedModel& weights, const ModelOptions& options) {
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

}  // namespace

uint64_t weightBytes(const ConvertedModel& stored) {
  return storedBytes(stored, 0, stored.config().numLayers, true);
}

std::unique_ptr<LanguageModel> buildLanguageModel(const ConvertedModel& stored, const ModelOptions& options) {
  // The stored weights bound what the layers upload (embeddings stay in the file): a model that
  // cannot fit is an Error naming both sizes before anything is copied. The same bound is each
  // GPU's upload total, known before the layers are made (it counts the untied embedding and,
  // with ModelOptions::layers, the layers left out, which never go up).
  const auto uploads = std::make_shared<ops::WeightUploads>();
  if (options.gpu) {
    const uint64_t bytes = weightBytes(stored), free = options.gpu->freeBytes();
    check(bytes <= free, stored.folder() + ": its weights take " + mib(bytes) + ", more than the " + mib(free) +
                             " free on " + options.gpu->describe());
    uploads->add(*options.gpu, bytes);
  }
  int64_t first = 0;
  for (size_t s = 0; s < options.stages.size(); ++s) {
    const Stage& stage = options.stages[s];
    const bool last = s + 1 == options.stages.size();
    const uint64_t bytes = storedBytes(stored, first, first + stage.layers, last), free = stage.gpu.freeBytes();
    check(bytes <= free, stored.folder() + ": the stage of layers " + std::to_string(first) + " to " +
                             std::to_string(first + stage.layers - 1) + " takes " + mib(bytes) + ", more than the " +
                             mib(free) + " free on " + stage.gpu.describe());
    uploads->add(stage.gpu, bytes);
    first += stage.layers;
  }
  const ConvertedModel loading = stored.uploadingThrough(uploads);
  std::unique_ptr<LanguageModel> model = buildArchitecture(options.gpu ? loading.placedOn(*options.gpu) : loading, options);
  uploads->finish();
  return model;
}

}  // namespace gizml::llm
