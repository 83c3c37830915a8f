#include "hub/names.h"

#include <gizml/error.h>

#include <algorithm>
#include <cctype>

namespace gizml::hub {

namespace {

const char* const kForm =
    " (a name is org/repo, org/repo:QUANT or org/repo:FILE.gguf, each with an optional @REVISION, or an alias: "
    "giz list --catalogue)";

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The hub's rule for each half of a repository id: 1-96 of [A-Za-z0-9_.-], not starting or
// ending with - or ., without -- or .. ("--" separates the halves in cache folder names).
bool validIdPart(const std::string& part) {
  if (part.empty() || part.size() > 96) return false;
  for (char c : part)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') return false;
  const char first = part.front(), last = part.back();
  if (first == '-' || first == '.' || last == '-' || last == '.') return false;
  return part.find("--") == std::string::npos && part.find("..") == std::string::npos;
}

bool validRevision(const std::string& rev) {
  if (rev.empty() || rev.size() > 255 || rev.front() == '/' || rev.back() == '/') return false;
  if (rev.find("..") != std::string::npos || rev.find("//") != std::string::npos) return false;
  for (char c : rev)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-' && c != '/') return false;
  return true;
}

bool validQuant(const std::string& quant) {
  if (quant.empty() || quant.size() > 32) return false;
  for (char c : quant)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

}  // namespace

std::string ModelName::text() const {
  std::string t = repo;
  if (!file.empty()) t += ":" + file;
  else if (!quant.empty()) t += ":" + quant;
  if (revision != "main") t += "@" + revision;
  return t;
}

const std::vector<CatalogueEntry>& catalogue() {
  static const std::vector<CatalogueEntry> entries = {
      {"qwen3:0.6b", "Qwen/Qwen3-0.6B", "Qwen3 0.6B (safetensors, converted on first use)"},
      {"smollm2", "HuggingFaceTB/SmolLM2-135M-Instruct", "SmolLM2 135M Instruct (safetensors)"},
      {"gemma3:270m", "google/gemma-3-270m-it", "Gemma 3 270M instruct (gated: accept its licence, set HF_TOKEN)"},
      {"z-image-turbo", "Tongyi-MAI/Z-Image-Turbo",
       "Z-Image Turbo, a diffusers pipeline: transformer/, vae/, text_encoder/ (Qwen3), tokenizer/, scheduler/"},
      {"flux3-klein", "black-forest-labs/FLUX.2-klein-4B",
       "FLUX.2 klein 4B, a diffusers pipeline: transformer/, vae/, text_encoder/, tokenizer/, scheduler/"},
  };
  return entries;
}

bool safeRepoPath(const std::string& path) {
  if (path.empty() || path.size() > 1024 || path.front() == '/' || path.back() == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string segment = path.substr(start, end - start);
    if (segment.empty() || segment == "." || segment == "..") return false;
    start = end + 1;
  }
  return std::none_of(path.begin(), path.end(), [](char c) {
    return c == '\\' || std::iscntrl(static_cast<unsigned char>(c));
  });
}

ModelName parseName(const std::string& text) {
  if (text.empty()) throw Error("an empty model name" + std::string(kForm));
  std::string rest = text, revision = "main";
  if (const size_t at = rest.find('@'); at != std::string::npos) {
    revision = rest.substr(at + 1);
    rest = rest.substr(0, at);
    if (!validRevision(revision))
      throw Error("'" + text + "': '" + revision + "' is no revision (a branch, tag or commit of [A-Za-z0-9_.-/])");
  }
  for (const CatalogueEntry& e : catalogue())
    if (lower(rest) == e.alias) {
      ModelName name = parseName(e.name);
      name.revision = revision;
      return name;
    }
  ModelName name;
  name.revision = revision;
  std::string selector;
  if (const size_t colon = rest.find(':'); colon != std::string::npos) {
    selector = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    if (selector.empty()) throw Error("'" + text + "': nothing after ':'" + kForm);
  }
  const size_t slash = rest.find('/');
  if (slash == std::string::npos)
    throw Error("'" + text + "' is neither a file or folder here, a repository (org/repo) nor an alias" + kForm);
  const std::string org = rest.substr(0, slash), repo = rest.substr(slash + 1);
  if (!validIdPart(org) || !validIdPart(repo))
    throw Error("'" + text + "': '" + rest + "' is no repository id (org/repo: letters, digits, _ . -)" + kForm);
  name.repo = rest;
  if (endsWith(lower(selector), ".gguf")) {
    if (!safeRepoPath(selector)) throw Error("'" + text + "': '" + selector + "' is no file path of a repository");
    name.file = selector;
  } else if (!selector.empty()) {
    if (!validQuant(selector))
      throw Error("'" + text + "': '" + selector + "' is neither a .gguf file nor a quantization such as Q4_K_M");
    name.quant = selector;
  }
  return name;
}

}  // namespace gizml::hub
