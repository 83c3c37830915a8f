// The two small real models of PyPI (tests/reference/models.txt), converted from their GGUF files
// and asked one question greedily with their chat templates. Skipped, with the reason, when
// scripts/setup.sh has not installed them or this build has no architectures yet.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>

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
};

// Writes the chat template of a tokenizer_config.json into a converted folder that lacks one.
void supplyChatTemplate(const fs::path& folder, const std::string& config) {
  std::ifstream in(folder / "manifest.json");
  nlohmann::ordered_json manifest = nlohmann::ordered_json::parse(in);
  if (!manifest.value("chat_template", std::string()).empty()) return;
  manifest["chat_template"] = nlohmann::ordered_json::parse(std::ifstream(config))["chat_template"];
  std::ofstream(folder / "manifest.json") << manifest.dump(1);
}

void askRivers(const Case& c) {
  const std::string gguf = ggufOf(c.name);
  if (gguf.empty()) GTEST_SKIP() << c.name << ": GGUF not installed (scripts/setup.sh installs tests/reference/models.txt)";
  const fs::path folder = fs::path(GIZML_BUILD_DIR) / "real_models" / c.name;
  if (!fs::exists(folder / "manifest.json")) {
    fs::remove_all(folder);
    fs::create_directories(folder);
    convert(gguf, folder.string());
  }
  if (c.templateConfig) supplyChatTemplate(folder, std::string(GIZML_SHARED_DATA) + "/" + c.templateConfig);
  std::optional<Model> model;
  try {
    model.emplace(load(folder.string()));
  } catch (const gizml::Error& e) {
    if (std::string(e.what()).find("is not built into") != std::string::npos) GTEST_SKIP() << e.what();
    throw;
  }
  const nlohmann::ordered_json messages = {{{"role", "user"}, {"content", "Name three rivers."}}};
  Request request;
  request.prompt = model->chatTokens(messages).ids;
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
  // "1. The River of Life: This is a beautiful and ancient river that runs through the heart of the
  // Amazon rainforest, flowing through the Amazon Basin and supporting the" (greedy, this build).
  askRivers({"smollm2", {33, 30, 378, 3992, 282, 5330, 42, 669, 314, 253, 3953, 284, 3201, 4626, 338, 7313,
                         738, 260, 1911, 282, 260, 9860, 22450, 28, 12819, 738, 260, 9860, 16463, 284, 5682, 260}});
}
TEST(RealModel, Gemma3NamesThreeRivers) { askRivers({"gemma3", {}, "tokenizers/gemma3/tokenizer_config.json"}); }
