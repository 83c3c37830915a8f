// giz chat MODEL [flags]: a conversation, one user message per line of stdin; the engine's slot
// keeps what it read, so each turn reads only its new messages.
#include <unistd.h>

#include <iostream>

#include "command_line.h"
#include "generation.h"

namespace {

constexpr const char* kUsage =
    "usage: giz chat [MODEL] [--context 4096] [--max-tokens 512] [--temperature 0] [--top-k 0]\n"
    "                 [--top-p 1] [--min-p 0] [--seed 0] [--system TEXT] [--think] [--bits 4]\n"
    "                 [--kv auto] [--device auto]\n"
    "  MODEL as for giz run (giz run --help; none: smollm2); reads one message per line from stdin until its end;\n"
    "  --kv and --device as for giz run\n";

}  // namespace

int chatCommand(int argc, char** argv) {
  if (asksHelp(argc, argv, 2)) return usageReply(kUsage, true);
  GenerationOptions options;
  std::vector<std::string> words;
  // Pictures are giz run's (--picture): a chat's turns are text.
  if (!parseGenerationFlags(argc, argv, 2, options, words) || words.size() > 1 || !options.pictures.empty())
    return usageReply(kUsage, false);
  const std::string folder = words.empty() ? defaultConvertedFolder(options.bits) : convertedFolder(words[0], options.bits);
  const gizml::llm::Model model = loadOn(options.device, folder, options.load);
  gizml::llm::Engine engine = model.engine(1, options.context);
  nlohmann::ordered_json messages = startMessages(options);
  const bool terminal = isatty(STDIN_FILENO) != 0;
  const auto promptUser = [&] {
    if (terminal) std::cout << "> " << std::flush;
    return true;
  };
  std::string line;
  while (promptUser() && std::getline(std::cin, line)) {
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    gizml::llm::Request request;
    gizml::llm::ChatTokens chat = model.chatTokens(messages, options.think);
    request.prompt = std::move(chat.ids);
    request.marks = std::move(chat.ends);  // where the next turn may resume
    request.limit = options.maxTokens;
    request.sampling = options.sampling;
    messages.push_back({{"role", "assistant"}, {"content", streamAnswer(engine, request)}});
  }
  return 0;
}
