// giz run MODEL "prompt" [flags]: one answer to one prompt, streamed as it is generated.
#include <gizml/vision.h>

#include <filesystem>
#include <iostream>

#include "command_line.h"
#include "generation.h"

namespace {

constexpr const char* kUsage =
    "usage: giz run [MODEL] PROMPT [--max-tokens 512] [--temperature 0] [--top-k 0] [--top-p 1]\n"
    "                  [--min-p 0] [--seed 0] [--system TEXT] [--think] [--bits 4] [--kv auto]\n"
    "                  [--device auto] [--picture FILE ...]\n"
    "  MODEL: a converted folder, a Hugging Face folder or .gguf file, or a name on the hub (Qwen/Qwen3-0.6B,\n"
    "  org/repo-GGUF:Q4_K_M, an alias of giz list --catalogue; docs/models.md), converted on first use;\n"
    "  no MODEL: smollm2 (SmolLM2-135M-Instruct); --bits: the conversion's width (2..8 or 16);\n"
    "  --kv: keys and values as f32, 16, or codes of 8, 4 or 2 bits, or apart as K/V (4/2); auto:\n"
    "  8 bits, else 4, else 4/2, the first in which the KV pool fits the memory available;\n"
    "  --device: cpu, gpu, or auto: the GPU when there is one and the model loads there, else the CPU\n"
    "  (stderr says which); --picture: a PNG or JPEG shown to a model with a vision tower (Qwen3.5,\n"
    "  Qwen3-VL: convert keeps it in FOLDER/vision) before the prompt, repeatable\n";

// The pictures read through the model's vision tower (FOLDER/vision) into `pictures`, and the
// content items that show them.
nlohmann::ordered_json shownPictures(const std::string& folder, const std::vector<std::string>& files,
                                     std::vector<gizml::llm::Picture>& pictures) {
  const std::filesystem::path tower = std::filesystem::path(folder) / "vision";
  if (!std::filesystem::exists(tower / "config.json"))
    throw gizml::Error("--picture: " + folder + " has no vision tower (vision/config.json): the model reads text only");
  const gizml::vision::Tower vision = gizml::vision::Tower::load(tower.string());
  nlohmann::ordered_json items = nlohmann::ordered_json::array();
  for (const std::string& path : files) {
    pictures.push_back(vision.picture(readPicture("--picture", path)));
    items.push_back({{"type", "image"}});
  }
  return items;
}

}  // namespace

int runCommand(int argc, char** argv) {
  if (asksHelp(argc, argv, 2)) return usageReply(kUsage, true);
  GenerationOptions options;
  std::vector<std::string> words;
  if (!parseGenerationFlags(argc, argv, 2, options, words) || words.empty() || words.size() > 2) return usageReply(kUsage, false);
  // One word: the prompt for the default model, unless it names a model (then the prompt is missing).
  if (words.size() == 1 && namesModel(words[0])) return usageReply(kUsage, false);
  const std::string folder = words.size() == 2 ? convertedFolder(words[0], options.bits) : defaultConvertedFolder(options.bits);
  const gizml::llm::Model model = loadOn(options.device, folder, options.load);
  nlohmann::ordered_json messages = startMessages(options);
  gizml::llm::Request request;
  if (options.pictures.empty()) {
    messages.push_back({{"role", "user"}, {"content", words.back()}});
    request.prompt = model.chatTokens(messages, options.think).ids;
  } else {
    messages.push_back({{"role", "user"}, {"content", shownPictures(folder, options.pictures, request.pictures)}});
    messages.back()["content"].push_back({{"type", "text"}, {"text", words.back()}});
    request.prompt = model.chatTokens(messages, request.pictures, options.think).ids;
  }
  request.limit = options.maxTokens;
  request.sampling = options.sampling;
  gizml::llm::Engine engine = model.engine(1, static_cast<int64_t>(request.prompt.size()) + options.maxTokens);
  streamAnswer(engine, request);
  return 0;
}
