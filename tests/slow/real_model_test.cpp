// The two small real models of PyPI (tests/reference/models.txt), converted from their GGUF files
// and asked one question greedily with their chat templates; their answers and logits against
// transformers on the same GGUF. Skipped, with the reason, when scripts/setup.sh has not
// installed them or this build has no architectures yet.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>
#include <system_error>
#include <unistd.h>

#include "llm/language_model.h"
#include "llm/quant/converted_model.h"
#include "real_models.h"

namespace fs = std::filesystem;
using namespace gizml::llm;

namespace {

// The converted model's greedy answer of 32 tokens to the rivers question (printed), or nullopt
// when this build lacks its architecture. Keys and values in f32: these tests hold the model's
// arithmetic to transformers'; the engine's automatic 8 bits move near-ties (SmolLM2 at 4 bits
// then begins "Here are three rivers", a margin the KV formats' KL in docs/benchmarks.md covers).
std::optional<std::vector<TokenId>> askRivers(const Case& c, const std::string& folder) {
  std::optional<Model> model;
  try {
    model.emplace(load(folder, {.kv = KvFormat(gizml::DType::F32)}));
  } catch (const gizml::Error& e) {
    if (std::string(e.what()).find("is not built into") != std::string::npos) return std::nullopt;
    throw;
  }
  Request request;
  request.prompt = model->chatTokens(kRiversQuestion).ids;
  request.limit = 32;
  Engine engine = model->engine(1, static_cast<int64_t>(request.prompt.size()) + 32);
  const Result result = engine.generate({request})[0];
  std::cout << c.name << " at " << c.bits.layers << " bits: " << model->tokenizer().decode(result.tokens, true)
            << "\nids:";
  for (TokenId t : result.tokens) std::cout << " " << t;
  std::cout << "\n";
  return result.tokens;
}

// How many of the first ids of `ours` are transformers' greedy answer's.
size_t agreeingPrefix(const std::vector<TokenId>& ours, const std::vector<TokenId>& reference) {
  return static_cast<size_t>(std::mismatch(ours.begin(), ours.end(), reference.begin(), reference.end()).first -
                             ours.begin());
}

// Our answer begins with transformers' greedy answer for at least `agreeing` tokens (all 32 when
// the conversion keeps the GGUF's values).
void expectTransformersAnswer(const Case& c, size_t agreeing) {
  const std::string folder = convertedFolder(c);
  if (folder.empty()) GTEST_SKIP() << notInstalled(c);
  const std::optional<std::vector<TokenId>> ours = askRivers(c, folder);
  if (!ours) GTEST_SKIP() << c.name << ": its architecture is not built into this build";
  const std::vector<TokenId> reference = referenceOf(c)["greedy"];
  ASSERT_EQ(reference.size(), 32u);
  const size_t n = agreeingPrefix(*ours, reference);
  std::printf("%s at %d bits: the first %zu of 32 greedy ids are transformers'\n", c.name, c.bits.layers, n);
  EXPECT_GE(n, agreeing) << "ours: " << ::testing::PrintToString(*ours)
                         << "\ntransformers: " << ::testing::PrintToString(reference);
}

// Our logits at transformers' top ids of every position of the question and its greedy answer
// (teacher-forced, one pass), as a share of transformers' logit range there, and the same argmax
// where it chose the answer.
void expectTransformersLogits(const Case& c) {
  const std::string folder = convertedFolder(c);
  if (folder.empty()) GTEST_SKIP() << notInstalled(c);
  const nlohmann::json ref = referenceOf(c);
  const std::vector<TokenId> prompt = ref["prompt"], answer = ref["greedy"];
  EXPECT_EQ(load(folder).chatTokens(kRiversQuestion).ids, prompt);

  std::vector<int32_t> tokens(prompt.begin(), prompt.end());
  tokens.insert(tokens.end(), answer.begin(), answer.end() - 1);
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(ConvertedModel::open(folder));
  const std::unique_ptr<SequenceState> state = model->newState(static_cast<int64_t>(tokens.size()));
  const std::vector<float> logits = model->forward({{state.get(), tokens, true}})[0].toFloats();
  const size_t vocab = static_cast<size_t>(model->config().vocabSize);
  ASSERT_EQ(logits.size(), tokens.size() * vocab);
  double worst = 0;
  for (size_t p = 0; p < tokens.size(); ++p) {
    const nlohmann::json& want = ref["positions"][p];
    const float* row = &logits[p * vocab];
    const double range = want["max"].get<double>() - want["min"].get<double>();
    for (size_t k = 0; k < want["top_ids"].size(); ++k)
      worst = std::max(worst, std::abs(row[want["top_ids"][k].get<size_t>()] - want["top_logits"][k].get<double>()) / range);
    if (p + 1 >= prompt.size()) {
      EXPECT_EQ(std::max_element(row, row + vocab) - row, answer[p + 1 - prompt.size()]) << "position " << p;
    }
  }
  std::printf("%s at %d bits: max error of the top logits %.6f of the range\n", c.name, c.bits.layers, worst);
  EXPECT_LT(worst, 1e-2);
}

}  // namespace

// SmolLM2's GGUF is Q4_1. At 16 bits we keep its values nearly as they are (F16 rounds them by
// <= 2^-11), so that the answer is transformers' own (tests/data/real_models/smollm2_rivers.json):
// "1. The River of Life: This is a beautiful and ancient river that runs through the heart of the
// Amazon rainforest. It is also known as the \"River".
const Case kSmolLM2 = {"smollm2", Bits{.layers = 16, .head = 16}, nullptr, "smollm2_rivers.json"};

TEST(RealModel, SmolLM2NamesThreeRivers) { expectTransformersAnswer(kSmolLM2, 32); }

TEST(RealModel, SmolLM2LogitsMatchTransformers) { expectTransformersLogits(kSmolLM2); }

// At our default 4 bits (a second quantization on top of Q4_1, and int8 activations) the answer
// is transformers' for its first 12 tokens, "1. The River of Life: This is a beautiful and", then
// chooses "sacred" over "ancient" (transformers' logits there: 25.795 and 25.785) and goes on its
// own way.
TEST(RealModel, SmolLM2At4BitsBeginsAsTransformers) {
  expectTransformersAnswer({"smollm2", Bits{}, nullptr, "smollm2_rivers.json"}, 12);
}

// Gemma at 16 bits: the GGUF's values nearly as they are, so that its answer can be transformers'
// own. (Its "Q4_K_M" file is mostly Q5_0 and Q8_0; at our default 4 bits, below that, it answers
// "Name the river." over and over: docs/benchmarks.md has the KL divergences.) The package's file is the pretrained model, not the
// instruction-tuned one (general.name "Gemma 3 270m", no chat template, eos <eos>), which is why
// it continues the text rather than answering: it echoes the question, then lists "(a)" to "(g)":
// "Name three rivers.\n(a)\n(b)\n(c)...".
const Case kGemma3 = {"gemma3", Bits{.layers = 16, .head = 16}, "tokenizers/gemma3/tokenizer_config.json",
                      "gemma3_rivers.json"};

TEST(RealModel, Gemma3NamesThreeRivers) { expectTransformersAnswer(kGemma3, 32); }

TEST(RealModel, Gemma3LogitsMatchTransformers) { expectTransformersLogits(kGemma3); }
