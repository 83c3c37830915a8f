#pragma once
// What giz run and giz chat share: finding (or converting) the model, their flags, and
// streaming an answer to stdout as its tokens come.
#include <gizml/llm.h>

#include <nlohmann/json.hpp>
#include <string>

#include "device_choice.h"
#include "model_source.h"

struct GenerationOptions {
  std::string model;
  std::string system;
  int64_t maxTokens = 512;
  int64_t context = 4096;  // chat: the most tokens a conversation keeps
  bool think = false;
  int bits = 0;  // --bits: the conversion's width (0: convert's default)
  gizml::llm::LoadOptions load;  // --kv: how the engine keeps keys and values
  std::string device = "auto";   // --device (device_choice.h)
  gizml::llm::Sampling sampling;
  std::vector<std::string> pictures;  // --picture FILE (giz run): shown to a model with a vision tower
};

/// Parses the shared flags from argv[first..]; the words that are no flag go to `words`.
/// Returns false on an unknown flag or a missing value.
bool parseGenerationFlags(int argc, char** argv, int first, GenerationOptions& options, std::vector<std::string>& words);

/// Messages with the system prompt first when there is one.
nlohmann::ordered_json startMessages(const GenerationOptions& options);

/// Runs request alone on engine, writing each piece of text to stdout as it comes; returns the text.
std::string streamAnswer(gizml::llm::Engine& engine, const gizml::llm::Request& request);
