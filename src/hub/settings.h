#pragma once
// Where the Hugging Face hub is and what we may do with it, read from the environment variables
// its own tools (huggingface_hub) read, so that both share one cache and one token.
#include <filesystem>
#include <string>

namespace gizml::hub {

struct Settings {
  std::string endpoint;           // HF_ENDPOINT, default https://huggingface.co (no trailing /)
  std::filesystem::path cache;    // HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub
  std::string token;              // HF_TOKEN, else the token file; empty: anonymous
  bool offline = false;           // HF_HUB_OFFLINE=1 (or TRANSFORMERS_OFFLINE): never touch the network
};

/// The settings of this process's environment. Throws gizml::Error when no cache folder can be named.
Settings settingsFromEnvironment();

/// True for the hub's spellings of true: 1, ON, YES, TRUE (any case).
bool isTrue(const char* value);

}  // namespace gizml::hub
