// The tunings file parser (gizhw::gpu::loadTunings) on arbitrary bytes: it may only throw gizml::Error,
// and what it accepts formats back to text that parses to the same entries.
// Run from the repository root: build/fuzz/fuzz/fuzz_tunings -max_total_time=60 fuzz/corpus/fuzz_tunings
#include <gizml/error.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gpu/tunings.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace tuning = gizhw::gpu::tuning;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<tuning::Entry> entries;
  try {
    entries = tuning::parse(text, "fuzz");
  } catch (const gizml::Error&) {
    return 0;
  }
  const std::vector<tuning::Entry> back = tuning::parse(tuning::format(entries), "formatted");
  if (back.size() != entries.size()) std::abort();
  for (size_t i = 0; i < back.size(); ++i)
    if (back[i].name != entries[i].name || back[i].key != entries[i].key || !(back[i].config == entries[i].config))
      std::abort();
  return 0;
}
