// The hub client's outside inputs on arbitrary bytes: a model name (the command line) and the
// API's answer (the network). They may only throw gizml::Error; a name that parses writes back
// to text that parses to the same name; every file of a parsed answer has a safe path and a
// hash-named blob, and the files chosen from it are among them.
// Run from the repository root: build/fuzz/fuzz/fuzz_hub -max_total_time=60 fuzz/corpus/fuzz_hub
#include <gizml/error.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "hub/names.h"
#include "hub/repo_info.h"

namespace {

void require(bool condition) {
  if (!condition) std::abort();
}

void name(const std::string& text) {
  gizml::hub::ModelName n;
  try {
    n = gizml::hub::parseName(text);
  } catch (const gizml::Error&) {
    return;
  }
  const gizml::hub::ModelName back = gizml::hub::parseName(n.text());
  require(back.repo == n.repo && back.revision == n.revision && back.file == n.file && back.quant == n.quant);
}

void answer(const std::string& text) {
  gizml::hub::RepoInfo info;
  try {
    info = gizml::hub::parseRepoInfo(text);
  } catch (const gizml::Error&) {
    return;
  }
  require(gizml::hub::isGitHash(info.commit));
  for (const gizml::hub::RepoFile& f : info.files) {
    require(gizml::hub::safeRepoPath(f.path));
    require(f.etag().empty() || f.etag().size() == 40 || f.etag().size() == 64);
  }
  for (const char* selector : {"o/r", "o/r:Q4_K_M"}) {
    try {
      for (const gizml::hub::RepoFile& chosen : gizml::hub::selectFiles(info.files, gizml::hub::parseName(selector), "{}").files) {
        bool found = false;
        for (const gizml::hub::RepoFile& f : info.files) found |= f.path == chosen.path;
        require(found);
      }
    } catch (const gizml::Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  name(text);
  answer(text);
  return 0;
}
