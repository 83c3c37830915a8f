#pragma once
// The small real models of PyPI (tests/reference/models.txt) as the slow tests use them: found
// by scripts/default-model.sh, converted once per build folder.
#include <gizml/llm.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include "common/test_paths.h"

namespace {

// (Each test file uses some of the helpers, hence [[maybe_unused]].)
namespace fs = std::filesystem;
using namespace gizml::llm;

// scripts/default-model.sh's answer, or "" when it fails.
[[maybe_unused]] std::string ggufOf(const std::string& name) {
  const fs::path script = fs::path(test_paths::testData()) / ".." / ".." / "scripts" / "default-model.sh";
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
  Bits bits;  // of the conversion
  // The model family's published chat template, for a GGUF that carries none (the Gemma package's
  // file has no tokenizer.chat_template): a tokenizer_config.json of ../shared/data.
  const char* templateConfig = nullptr;
  // transformers' answer and logits on the same GGUF (tests/reference/compare_gguf_transformers.py),
  // in tests/data/real_models.
  const char* reference = nullptr;
};

[[maybe_unused]] nlohmann::json referenceOf(const Case& c) {
  std::ifstream in(test_paths::testData() + "/real_models/" + c.reference);
  return nlohmann::json::parse(in);
}

// Writes the chat template of a tokenizer_config.json into a converted folder that lacks one.
[[maybe_unused]] void supplyChatTemplate(const fs::path& folder, const std::string& config) {
  std::ifstream in(folder / "manifest.json");
  nlohmann::ordered_json manifest = nlohmann::ordered_json::parse(in);
  if (!manifest.value("chat_template", std::string()).empty()) return;
  manifest["chat_template"] = nlohmann::ordered_json::parse(std::ifstream(config))["chat_template"];
  std::ofstream(folder / "manifest.json") << manifest.dump(1);
}

[[maybe_unused]] const nlohmann::ordered_json kRiversQuestion = {{{"role", "user"}, {"content", "Name three rivers."}}};

/// The case's GGUF converted once per build folder, or "" when it is not installed.
[[maybe_unused]] std::string convertedFolder(const Case& c) {
  const std::string gguf = ggufOf(c.name);
  if (gguf.empty()) return "";
  const fs::path folder =
      fs::path(test_paths::buildDir()) / "real_models" / (std::string(c.name) + "_" + std::to_string(c.bits.layers) + "bits");
  if (!fs::exists(folder)) {
    // CTest runs several of these tests at once: each converts into its own folder and renames
    // it into place, so that no test reads a folder another is still writing.
    const fs::path mine = folder.string() + ".part" + std::to_string(::getpid());
    fs::remove_all(mine);
    fs::create_directories(mine);
    convert(gguf, mine.string(), c.bits);
    if (c.templateConfig) supplyChatTemplate(mine, test_paths::sharedData() + "/" + c.templateConfig);
    std::error_code taken;  // another test renamed its copy first: theirs is as good
    fs::rename(mine, folder, taken);
    fs::remove_all(mine);
  }
  return folder.string();
}

[[maybe_unused]] std::string notInstalled(const Case& c) {
  return std::string(c.name) + ": GGUF not installed (scripts/setup.sh installs tests/reference/models.txt)";
}

}  // namespace
