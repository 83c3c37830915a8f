#include "llm/engine/kv_choice.h"

#include <gizml/error.h>

#include <string>

namespace gizml::llm {

KvFormat chooseKvFormat(int64_t pages, int64_t available, const std::function<int64_t(const KvFormat&)>& pageBytes) {
  bool made = false;
  int64_t least = 0;
  for (const char* text : {"8", "4", "4/2"}) {
    const KvFormat format = KvFormat::parse(text);
    int64_t bytes = 0;
    try {
      bytes = pageBytes(format) * pages;
    } catch (const Error&) {
      continue;  // these heads do not code
    }
    if (available == 0 || bytes <= available) return format;
    made = true;
    least = bytes;
  }
  if (!made) return KvFormat::parse("16");
  throw Error("engine: its KV pool of " + std::to_string(pages) + " pages needs " + std::to_string(least >> 20) +
              " MiB even with keys in 4 bits and values in 2; " + std::to_string(available >> 20) +
              " MiB are available where its pages go (the machine's memory, or its GPU's): fewer slots, a "
              "shorter context or a smaller pool");
}

}  // namespace gizml::llm
