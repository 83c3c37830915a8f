// The two small real models of PyPI (tests/reference/models.txt), converted from their GGUF files
// and asked one question greedily with their chat templates; Gemma's answer and logits against
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

#include "llm/models/language_model.h"
#include "llm/quant/converted_model.h"

namespace fs = std::filesystem;
using namespace gizml::llm;

namespace {

// scripts/default-model.sh's answer, or "" when it fails.
std::string ggufOf(const std::string& name) {
  const fs::path script = fs::path(GIZML_TEST_DATA) / ".." / ".." / "scripts" / "default-model.sh";
  FILE* pipe = popen((script.string() + " " + name + " 2>/dev/null").c_str(), "r");
  if (!pipe) return "";
  std::string out;
  char buffer[512];
  while (fgets(buffer, sizeof buffer, pipe)) out += buffer;
  if (pclose(pipe) != 0) return "";
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

struct Case {
  const char* name;
  std::vector<TokenId> expected;  // the first 32 greedy ids; empty until pinned
  // The model family's published chat template, for a GGUF that carries none (the Gemma package's
  // file has no tokenizer.chat_template): a tokenizer_config.json of ../shared/data.
  const char* templateConfig = nullptr;
  Bits bits = {};  // of the conversion
};

// Writes the chat template of a tokenizer_config.json into a converted folder that lacks one.
void supplyChatTemplate(const fs::path& folder, const std::string& config) {
  std::ifstream in(folder / "manifest.json");
  nlohmann::ordered_json manifest = nlohmann::ordered_json::parse(in);
  if (!manifest.value("chat_template", std::string()).empty()) return;
  manifest["chat_template"] = nlohmann::ordered_json::parse(std::ifstream(config))["chat_template"];
  std::ofstream(folder / "manifest.json") << manifest.dump(1);
}

const nlohmann::ordered_json kRiversQuestion = {{{"role", "user"}, {"content", "Name three rivers."}}};

/// The case's GGUF converted once per build folder, or "" when it is not installed.
std::string convertedFolder(const Case& c) {
  const std::string gguf = ggufOf(c.name);
  if (gguf.empty()) return "";
  const fs::path folder =
      fs::path(GIZML_BUILD_DIR) / "real_models" / (std::string(c.name) + "_" + std::to_string(c.bits.layers) + "bits");
  if (!fs::exists(folder / "manifest.json")) {
    fs::remove_all(folder);
    fs::create_directories(folder);
    convert(gguf, folder.string(), c.bits);
  }
  if (c.templateConfig) supplyChatTemplate(folder, std::string(GIZML_SHARED_DATA) + "/" + c.templateConfig);
  return folder.string();
}

std::string notInstalled(const Case& c) {
  return std::string(c.name) + ": GGUF not installed (scripts/setup.sh installs tests/reference/models.txt)";
}

void askRivers(const Case& c) {
  const std::string folder = convertedFolder(c);
  if (folder.empty()) {
    GTEST_SKIP() << notInstalled(c);
  }
  std::optional<Model> model;
  try {
    model.emplace(load(folder));
  } catch (const gizml::Error& e) {
    if (std::string(e.what()).find("is not built into") != std::string::npos) GTEST_SKIP() << e.what();
    throw;
  }
  Request request;
  request.prompt = model->chatTokens(kRiversQuestion).ids;
  request.limit = 32;
  Engine engine = model->engine(1, static_cast<int64_t>(request.prompt.size()) + 32);
  const Result result = engine.generate({request})[0];
  std::cout << c.name << ": " << model->tokenizer().decode(result.tokens, true) << "\nids:";
  for (TokenId t : result.tokens) std::cout << " " << t;
  std::cout << "\n";
  ASSERT_FALSE(result.tokens.empty());
  if (c.expected.empty()) GTEST_SKIP() << c.name << ": ids printed above, not yet pinned";
  const size_t n = std::min(c.expected.size(), result.tokens.size());
  EXPECT_EQ(std::vector<TokenId>(result.tokens.begin(), result.tokens.begin() + static_cast<std::ptrdiff_t>(n)),
            std::vector<TokenId>(c.expected.begin(), c.expected.begin() + static_cast<std::ptrdiff_t>(n)));
}

}  // namespace

TEST(RealModel, SmolLM2NamesThreeRivers) {
  // "1. The River of Life: This is a beautiful and sacred river that runs through the heart of the
  // Amazon rainforest, where indigenous communities have lived for centuries." (greedy, our 4-bit
  // conversion of its Q4_1 with int8 activations; with f32 activations token 13 was "ancient"
  // and the rest followed it). Our own output, pinned against regressions, not a reference.
  askRivers({"smollm2", {33, 30, 378, 3992, 282, 5330, 42, 669, 314, 253, 3953, 284, 9149, 4626, 338, 7313,
                         738, 260, 1911, 282, 260, 9860, 22450, 28, 837, 6071, 2429, 457, 4161, 327, 5034, 30}});
}

// Gemma at 16 bits: the GGUF's Q4_K_M values nearly as they are (F16 rounds them by <= 2^-11),
// so that its answer can be transformers' own. (At our default 4 bits, a second quantization on
// top of Q4_K, it answers "Name the river." over and over.) The package's file is the pretrained
// model, not the instruction-tuned one (general.name "Gemma 3 270m", no chat template, eos
// <eos>), which is why it continues the text rather than answering.
const Case kGemma3 = {"gemma3", {}, "tokenizers/gemma3/tokenizer_config.json", Bits{.layers = 16, .head = 16}};

TEST(RealModel, Gemma3NamesThreeRivers) {
  Case c = kGemma3;
  // transformers' greedy answer on the same GGUF (tests/data/real_models/gemma3_rivers.json): the
  // model echoes the question, then lists "(a)" to "(g)": "Name three rivers.\n(a)\n(b)\n(c)...".
  c.expected = {1567,   1806,   25971,  236761, 107, 236769, 236746, 236768, 107, 236769, 236763,
                236768, 107,    236769, 236755, 236768, 107, 236769, 236753, 236768, 107, 236769,
                236744, 236768, 107,    236769, 236760, 236768, 107, 236769, 236759, 236768};
  askRivers(c);
}

// transformers on the same GGUF (tests/reference/compare_gguf_transformers.py): the same prompt
// ids, our logits at its top ids of every position of the question and its greedy answer, and
// the same argmax where it chose the answer.
TEST(RealModel, Gemma3LogitsMatchTransformers) {
  const std::string folder = convertedFolder(kGemma3);
  if (folder.empty()) {
    GTEST_SKIP() << notInstalled(kGemma3);
  }
  std::ifstream in(std::string(GIZML_TEST_DATA) + "/real_models/gemma3_rivers.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
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
  std::printf("gemma3 at 16 bits: max error of the top logits %.6f of the range\n", worst);
  EXPECT_LT(worst, 1e-2);
}
