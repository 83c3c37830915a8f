#pragma once
// The architecture families, one file each; buildLanguageModel picks one by architecture.
#include <memory>

#include "llm/language_model.h"

namespace gizml::llm {

/// Llama, Mistral, Qwen2, Qwen3, Qwen3-VL text (llama.cpp).
std::unique_ptr<LanguageModel> buildLlama(const ConvertedModel& weights, const ModelOptions& options);
/// Gemma 3 text (gemma3.cpp).
std::unique_ptr<LanguageModel> buildGemma3(const ConvertedModel& weights, const ModelOptions& options);
/// Qwen 3.5 text, dense and MoE (qwen35.cpp).
std::unique_ptr<LanguageModel> buildQwen35(const ConvertedModel& weights, const ModelOptions& options);

}  // namespace gizml::llm
