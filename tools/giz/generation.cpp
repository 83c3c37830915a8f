#include "generation.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "command_line.h"

bool parseGenerationFlags(int argc, char** argv, int first, GenerationOptions& o, std::vector<std::string>& words) {
  gizml::llm::Sampling& s = o.sampling;
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool hasValue = i + 1 < argc;
    if (arg == "--think") o.think = true;
    else if (arg.rfind("--", 0) != 0) words.push_back(arg);
    else if (!hasValue) return false;
    else if (arg == "--max-tokens") o.maxTokens = parseCount(arg, argv[++i]);
    else if (arg == "--context") o.context = parseCount(arg, argv[++i]);
    else if (arg == "--system") o.system = argv[++i];
    else if (arg == "--temperature") s.temperature = parseNumber(arg, argv[++i]);
    else if (arg == "--top-k") s.topK = static_cast<int>(parseCount(arg, argv[++i]));
    else if (arg == "--top-p") s.topP = parseNumber(arg, argv[++i]);
    else if (arg == "--min-p") s.minP = parseNumber(arg, argv[++i]);
    else if (arg == "--seed") s.seed = static_cast<uint64_t>(parseCount(arg, argv[++i]));
    else if (arg == "--bits") o.bits = parseBits(argv[++i]);
    else if (arg == "--kv") o.load.kv = gizml::llm::KvFormat::parseSetting(argv[++i]);
    else if (arg == "--device") o.device = argv[++i];
    else if (arg == "--picture") o.pictures.push_back(argv[++i]);
    else return false;
  }
  return true;
}

nlohmann::ordered_json startMessages(const GenerationOptions& options) {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!options.system.empty()) messages.push_back({{"role", "system"}, {"content", options.system}});
  return messages;
}

std::string streamAnswer(gizml::llm::Engine& engine, const gizml::llm::Request& request) {
  std::string text;
  engine.add(request);
  while (engine.running() > 0)
    for (const gizml::llm::Progress& p : engine.advance()) {
      text += p.text;
      std::cout << p.text << std::flush;
    }
  std::cout << "\n" << std::flush;
  return text;
}
