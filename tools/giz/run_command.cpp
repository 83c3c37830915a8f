// giz run MODEL "prompt" [flags]: one answer to one prompt, streamed as it is generated.
#include <iostream>

#include "generation.h"

namespace {

int runUsage() {
  std::cerr << "usage: giz run MODEL PROMPT [--max-tokens 512] [--temperature 0] [--top-k 0] [--top-p 1]\n"
               "                [--min-p 0] [--seed 0] [--system TEXT] [--think]\n"
               "  MODEL: a converted folder, or a Hugging Face folder or .gguf file (converted on first use)\n";
  return 2;
}

}  // namespace

int runCommand(int argc, char** argv) {
  GenerationOptions options;
  std::vector<std::string> words;
  if (!parseGenerationFlags(argc, argv, 2, options, words) || words.size() != 2) return runUsage();
  const gizml::llm::Model model = gizml::llm::load(convertedFolder(words[0], options.bits));
  nlohmann::ordered_json messages = startMessages(options);
  messages.push_back({{"role", "user"}, {"content", words[1]}});
  gizml::llm::Request request;
  request.prompt = model.chatTokens(messages, options.think).ids;
  request.limit = options.maxTokens;
  request.sampling = options.sampling;
  gizml::llm::Engine engine = model.engine(1, static_cast<int64_t>(request.prompt.size()) + options.maxTokens);
  streamAnswer(model, engine, request);
  return 0;
}
