#include "hub/settings.h"

#include <gizml/error.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>

namespace fs = std::filesystem;

namespace gizml::hub {

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

fs::path hfHome() {
  if (const std::string home = environment("HF_HOME"); !home.empty()) return home;
  if (const std::string xdg = environment("XDG_CACHE_HOME"); !xdg.empty()) return fs::path(xdg) / "huggingface";
  const std::string home = environment("HOME");
  return home.empty() ? fs::path() : fs::path(home) / ".cache" / "huggingface";
}

std::string trimmed(std::string text) {
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  text.erase(text.begin(), std::find_if_not(text.begin(), text.end(), space));
  text.erase(std::find_if_not(text.rbegin(), text.rend(), space).base(), text.end());
  return text;
}

// The token `huggingface-cli login` stored: $HF_TOKEN_PATH, else $HF_HOME/token.
std::string storedToken(const fs::path& home) {
  const std::string named = environment("HF_TOKEN_PATH");
  if (named.empty() && home.empty()) return "";
  std::ifstream in(named.empty() ? home / "token" : fs::path(named));
  if (!in) return "";
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return trimmed(text);
}

}  // namespace

bool isTrue(const char* value) {
  if (!value) return false;
  std::string v(value);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

Settings settingsFromEnvironment() {
  Settings s;
  s.endpoint = environment("HF_ENDPOINT");
  if (s.endpoint.empty()) s.endpoint = "https://huggingface.co";
  while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();
  const std::string cache = environment("HF_HUB_CACHE");
  const fs::path home = hfHome();
  if (cache.empty() && home.empty())
    throw Error("none of HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME and HOME is set: no folder for the hub's cache");
  s.cache = cache.empty() ? home / "hub" : fs::path(cache);
  s.token = trimmed(environment("HF_TOKEN"));
  if (s.token.empty()) s.token = storedToken(home);
  s.offline = isTrue(std::getenv("HF_HUB_OFFLINE")) || isTrue(std::getenv("TRANSFORMERS_OFFLINE"));
  return s;
}

}  // namespace gizml::hub
