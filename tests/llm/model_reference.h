#pragma once
// The transformers fixtures of tests/data/models/<arch>/ (tests/reference/make_model_fixtures.py)
// and what the model tests do with them: convert once per process, logits of a prompt, errors.
// (Each test file uses some of the helpers, hence [[maybe_unused]].)
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "common/float_compare.h"
#include "common/temporary.h"
#include "llm/formats/safetensors.h"
#include "llm/language_model.h"
#include "llm/quant/converted_model.h"
#include "llm_test_util.h"
#include "common/test_paths.h"

namespace {

using namespace gizml;
using namespace gizml::llm;
namespace fs = std::filesystem;

[[maybe_unused]] std::string modelData(const std::string& arch) { return test_paths::testData() + "/models/" + arch; }

struct Reference {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<float>> logits;  // per prompt, [length, vocab]
  size_t greedyPrompt = 0;
  std::vector<int32_t> greedy;
};

[[maybe_unused]] Reference readReference(const std::string& arch) {
  std::ifstream in(modelData(arch) + "/reference.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  Reference r;
  r.prompts = j["prompts"].get<std::vector<std::vector<int32_t>>>();
  r.greedyPrompt = j["greedy_prompt"].get<size_t>();
  r.greedy = j["greedy"].get<std::vector<int32_t>>();
  const SafetensorsFile file(modelData(arch) + "/reference.safetensors");
  for (size_t i = 0; i < r.prompts.size(); ++i) r.logits.push_back(file.load("logits_" + std::to_string(i)).toFloats());
  return r;
}

// Groups of 256 values do not divide the fixtures' rows (64 and 128 values), so convert keeps
// every tensor in f32: the model's arithmetic alone, without quantization.
constexpr int kUnquantized = 0;

/// The fixture converted at `bits` (layers and head; 16: F16; kUnquantized: f32), once per test
/// program.
[[maybe_unused]] const ConvertedModel& converted(const std::string& arch, int bits) {
  static std::map<std::pair<std::string, int>, ConvertedModel> cache;
  const auto key = std::pair{arch, bits};
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const fs::path out = gizml::test::temporary("model_test_" + arch + "_q" + std::to_string(bits));
  fs::remove_all(out);
  const Bits stored = bits == kUnquantized ? Bits{.layers = 8, .head = 8, .group = 256} : Bits{.layers = bits, .head = bits};
  convert(modelData(arch) + "/hf", out.string(), stored);
  return cache.emplace(key, ConvertedModel::open(out.string())).first->second;
}

/// A copy of the converted llama (8 bits) whose manifest `edit` changed.
[[maybe_unused]] std::string editedModel(const std::string& tag, const std::function<void(nlohmann::json&)>& edit) {
  const std::string out = freshFolder(tag);
  const std::string from = converted("llama", 8).folder();
  for (const char* file : {kManifestName, kDataName}) fs::copy_file(fs::path(from) / file, fs::path(out) / file);
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(fs::path(out) / kManifestName));
  edit(manifest);
  std::ofstream(fs::path(out) / kManifestName) << manifest.dump(1);
  return out;
}

/// A copy of the converted llama (8 bits) with a tokenizer, Qwen3's: llm::load needs one, and the
/// tests that load it read none of it.
[[maybe_unused]] std::string loadableLlama(const std::string& tag) {
  const std::string folder = editedModel(tag, [](nlohmann::json&) {});
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(test_paths::sharedData() + "/tokenizers/qwen3/" + file, fs::path(folder) / file);
  return folder;
}

/// The manifest's entry of tensor `name`.
[[maybe_unused]] nlohmann::json& entry(nlohmann::json& manifest, const std::string& name) {
  for (nlohmann::json& t : manifest["tensors"])
    if (t["name"] == name) return t;
  throw std::runtime_error("no " + name);
}

/// Every position's logits of tokens fed at once to a fresh state.
[[maybe_unused]] std::vector<float> logitsOf(LanguageModel& model, const std::vector<int32_t>& tokens) {
  const std::unique_ptr<SequenceState> state = model.newState(static_cast<int64_t>(tokens.size()));
  return model.forward({{state.get(), tokens, true}})[0].toFloats();
}

[[maybe_unused]] int64_t argmax(const float* row, int64_t n) { return std::max_element(row, row + n) - row; }

/// The greedy continuation of the fixture's greedy prompt, a token per forward pass (the logits
/// read where they are: host memory or a GPU).
[[maybe_unused]] std::vector<int32_t> greedyContinuation(LanguageModel& model, const Reference& ref) {
  const std::vector<int32_t>& prompt = ref.prompts[ref.greedyPrompt];
  const int64_t vocab = model.config().vocabSize;
  const std::unique_ptr<SequenceState> state = model.newState(static_cast<int64_t>(prompt.size() + ref.greedy.size()));
  std::vector<int32_t> feed = prompt, got;
  while (got.size() < ref.greedy.size()) {
    const std::vector<float> logits = model.forward({{state.get(), feed}})[0].toFloats();
    got.push_back(static_cast<int32_t>(argmax(logits.data(), vocab)));
    feed = {got.back()};
  }
  return got;
}

/// Two of the fixture's prompts fed in one pass, then one decode step of both: each sequence's
/// logits are the bits it gives alone (batch invariance, tests/llm/batch_invariance_test.cpp).
[[maybe_unused]] void expectBatchedRowsAlone(LanguageModel& model, const Reference& ref) {
  const std::vector<int32_t>& a = ref.prompts[2];
  const std::vector<int32_t>& b = ref.prompts[3];
  const std::vector<float> aloneA = logitsOf(model, a), aloneB = logitsOf(model, b);
  const std::unique_ptr<SequenceState> sa = model.newState(64), sb = model.newState(64);
  const std::vector<tensor::Tensor> together = model.forward({{sa.get(), a, true}, {sb.get(), b, true}});
  EXPECT_EQ(together[0].toFloats(), aloneA);
  EXPECT_EQ(together[1].toFloats(), aloneB);
  EXPECT_EQ(sa->length(), static_cast<int64_t>(a.size()));
  EXPECT_EQ(sb->length(), static_cast<int64_t>(b.size()));
  const std::vector<tensor::Tensor> step = model.forward({{sa.get(), {7}}, {sb.get(), {9}}});
  for (auto [prompt, token, got] : {std::tuple{&a, 7, step[0]}, std::tuple{&b, 9, step[1]}}) {
    std::vector<int32_t> all = *prompt;
    all.push_back(token);
    const std::vector<float> alone = logitsOf(model, all);
    EXPECT_EQ(got.toFloats(), std::vector<float>(alone.end() - model.config().vocabSize, alone.end()));
  }
}

/// (tests/common/float_compare.h)
using gizml::test::relativeMaxError;

}  // namespace
