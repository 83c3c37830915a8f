// giz tokenize --tokenizer PATH [--special] TEXT      prints the ids of TEXT
// giz tokenize --tokenizer PATH --decode ID...         prints the text of the ids
#include <gizml/error.h>
#include <gizml/tokenizer.h>

#include <charconv>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "command_line.h"

namespace {

using gizml::llm::TokenId;
using gizml::llm::Tokenizer;

constexpr const char* kUsage =
    "usage: giz tokenize --tokenizer PATH [--special] TEXT\n"
    "       giz tokenize --tokenizer PATH --decode ID...\n"
    "  PATH: a folder with tokenizer.json, a tokenizer.json file or a .gguf file\n"
    "  --special: add the BOS and other tokens the tokenizer puts around a sequence\n";

Tokenizer openTokenizer(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) throw gizml::Error(path.string() + ": no such file or folder");
  if (path.extension() == ".gguf") return Tokenizer::fromGguf(path.string());
  return Tokenizer::fromJson(path.string());
}

// Ids from the arguments; one argument may hold several, separated by spaces ("1 2 3").
std::vector<TokenId> parseIds(const std::vector<std::string>& args, const Tokenizer& tokenizer) {
  std::vector<TokenId> ids;
  for (const std::string& arg : args) {
    std::istringstream words(arg);
    for (std::string word; words >> word;) {
      TokenId id = 0;
      const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), id);
      if (error != std::errc() || end != word.data() + word.size()) {
        throw gizml::Error("'" + word + "' is not a token id");
      }
      if (id < 0 || static_cast<size_t>(id) >= tokenizer.vocabSize()) {
        throw gizml::Error("token id " + word + " is out of range (the vocabulary has " +
                           std::to_string(tokenizer.vocabSize()) + " tokens)");
      }
      ids.push_back(id);
    }
  }
  return ids;
}

}  // namespace

int tokenizeCommand(int argc, char** argv) {
  if (asksHelp(argc, argv, 2)) return usageReply(kUsage, true);
  std::string path;
  bool decode = false, special = false;
  std::vector<std::string> rest;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--tokenizer" && i + 1 < argc) path = argv[++i];
    else if (arg == "--decode") decode = true;
    else if (arg == "--special") special = true;
    else if (arg.rfind("--", 0) == 0) return usageReply(kUsage, false);
    else rest.push_back(arg);
  }
  if (path.empty() || rest.empty() || (!decode && rest.size() != 1)) return usageReply(kUsage, false);
  const Tokenizer tokenizer = openTokenizer(path);
  if (decode) {
    std::cout << tokenizer.decode(parseIds(rest, tokenizer)) << "\n";
    return 0;
  }
  const std::vector<TokenId> ids = tokenizer.encode(rest.front(), special);
  for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
  std::cout << "\n";
  return 0;
}
