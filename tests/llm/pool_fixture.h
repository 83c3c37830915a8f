#pragma once
// The KV pool tests' model and prompts: the llama fixture (8-bit weights, keys and values in
// f32), random prompts of its vocabulary, and prompts put together.
#include <gizml/llm.h>

#include <memory>
#include <random>
#include <vector>

#include "llm/language_model.h"
#include "llm/model_reference.h"

namespace {

using gizml::llm::LanguageModel;
using gizml::llm::TokenId;

inline const std::shared_ptr<LanguageModel>& llama() {
  static const std::shared_ptr<LanguageModel> model = gizml::llm::buildLanguageModel(converted("llama", 8));
  return model;
}

// n tokens of the model's vocabulary, drawn with `seed`.
inline std::vector<TokenId> tokens(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<TokenId> pick(0, static_cast<TokenId>(llama()->config().vocabSize - 1));
  std::vector<TokenId> out(n);
  for (TokenId& t : out) t = pick(rng);
  return out;
}

inline std::vector<TokenId> operator+(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace
