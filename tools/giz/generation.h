#pragma once
// What giz run and giz chat share: finding (or converting) the model, their flags, and
// streaming an answer to stdout as its tokens come.
#include <gizml/llm.h>

#include <nlohmann/json.hpp>
#include <string>

struct GenerationOptions {
  std::string model;
  std::string system;
  int64_t maxTokens = 512;
  int64_t context = 4096;  // chat: the most tokens a conversation keeps
  bool think = false;
  gizml::llm::Sampling sampling;
};

/// Parses the shared flags from argv[first..]; the words that are no flag go to `words`.
/// Returns false on an unknown flag or a missing value.
bool parseGenerationFlags(int argc, char** argv, int first, GenerationOptions& options, std::vector<std::string>& words);

/// The converted folder of model: itself when it is one, else its conversion in the cache
/// ($XDG_CACHE_HOME/gizml/models/<name>), made on first use.
std::string convertedFolder(const std::string& model);

/// Messages with the system prompt first when there is one.
nlohmann::ordered_json startMessages(const GenerationOptions& options);

/// Runs request alone on engine, writing each piece of text to stdout as it comes; returns the text.
std::string streamAnswer(const gizml::llm::Model& model, gizml::llm::Engine& engine, const gizml::llm::Request& request);
