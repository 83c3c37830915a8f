#pragma once
// A model's name on the Hugging Face hub, as giz takes it:
//   org/repo                 the repository at its main branch
//   org/repo:Q4_K_M          the GGUF file whose name holds that quantization (any case)
//   org/repo:file.gguf       that GGUF file
//   ...@REVISION             a branch, tag or 40-hex commit (default main)
//   ALIAS[@REVISION]         a short name from the catalogue (qwen3:0.6b, smollm2, ...)
// An existing local path is never a name (the caller checks that first).
#include <string>
#include <vector>

namespace gizml::hub {

struct ModelName {
  std::string repo;                // "org/name"
  std::string revision = "main";
  std::string file;                // a GGUF file of the repository, or empty
  std::string quant;               // a quantization in the GGUF file's name, or empty
  /// The name written back: repo[:file or quant][@revision unless main].
  std::string text() const;
};

/// One alias of the catalogue and what it stands for.
struct CatalogueEntry {
  std::string alias;
  std::string name;         // parsed like any other name
  std::string description;  // for docs and giz list
};

/// The committed catalogue of short names.
const std::vector<CatalogueEntry>& catalogue();

/// Parses text; throws gizml::Error saying what is wrong and what a name looks like.
ModelName parseName(const std::string& text);

/// True when path is a safe relative path inside a repository (no "..", no absolute path,
/// no backslash or control character, no empty segment).
bool safeRepoPath(const std::string& path);

}  // namespace gizml::hub
