// giz template: renders a chat template on a conversation, as transformers' apply_chat_template
// would, and prints the text.
#include <gizml/chat_template.h>
#include <gizml/error.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "command_line.h"

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  gizml::check(static_cast<bool>(in), "cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::ordered_json readJson(const std::string& path) {
  try {
    return nlohmann::ordered_json::parse(readFile(path));
  } catch (const nlohmann::json::exception& e) {
    throw gizml::Error(path + ": " + e.what());
  }
}

// --var name=value: JSON when it parses (false, 3, "x", [..]), else the plain string.
void addVar(nlohmann::ordered_json& vars, const std::string& spec) {
  const std::size_t eq = spec.find('=');
  gizml::check(eq != std::string::npos && eq > 0, "--var expects name=value, got '" + spec + "'");
  const std::string value = spec.substr(eq + 1);
  vars[spec.substr(0, eq)] = nlohmann::ordered_json::accept(value) ? nlohmann::ordered_json::parse(value)
                                                                    : nlohmann::ordered_json(value);
}

constexpr const char* kUsage =
    "usage: giz template --template FILE --messages FILE.json [--tools FILE.json]\n"
    "                    [--var NAME=VALUE]... [--no-generation-prompt]\n"
    "  FILE is a Jinja chat template, or a tokenizer_config.json with a chat_template.\n";

}  // namespace

int templateCommand(int argc, char** argv) {
  if (asksHelp(argc, argv, 2)) return usageReply(kUsage, true);
  std::string templatePath, messagesPath, toolsPath;
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  bool generationPrompt = true;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      gizml::check(i + 1 < argc, a + " needs a value");
      return argv[++i];
    };
    if (a == "--template") templatePath = value();
    else if (a == "--messages") messagesPath = value();
    else if (a == "--tools") toolsPath = value();
    else if (a == "--var") addVar(vars, value());
    else if (a == "--no-generation-prompt") generationPrompt = false;
    else return usageReply(kUsage, false);
  }
  if (templatePath.empty() || messagesPath.empty()) return usageReply(kUsage, false);
  std::string source = readFile(templatePath);
  if (templatePath.size() >= 5 && templatePath.compare(templatePath.size() - 5, 5, ".json") == 0) {
    const nlohmann::ordered_json config = readJson(templatePath);
    gizml::check(config.contains("chat_template") && config["chat_template"].is_string(),
                 templatePath + " has no chat_template string");
    source = config["chat_template"].get<std::string>();
  }
  const auto chat = gizml::llm::ChatTemplate::parse(source);
  const nlohmann::ordered_json tools = toolsPath.empty() ? nlohmann::ordered_json() : readJson(toolsPath);
  std::cout << chat.renderChat(readJson(messagesPath), tools, generationPrompt, vars);
  return 0;
}
