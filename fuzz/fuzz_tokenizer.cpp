// Tokenizers on arbitrary input: encode any bytes, decode (and stream-decode) any ids, parse any
// GGUF file as a vocabulary. Nothing may crash; bad ids and files may only throw gizml::Error.
// Run from the repository root: build/fuzz/fuzz/fuzz_tokenizer -max_total_time=60
#include <gizml/error.h>
#include <gizml/tokenizer.h>

#include <cstring>
#include <string_view>
#include <vector>

#include "llm/formats/gguf.h"
#include "llm/tokenizer/load_gguf.h"
#include "llm/tokenizer/unicode.h"

namespace {

using gizml::llm::Tokenizer;

const std::vector<Tokenizer>& tokenizers() {
  static const std::vector<Tokenizer> all = [] {
    std::vector<Tokenizer> v;
    v.push_back(Tokenizer::fromJson("../shared/data/tokenizers/qwen3"));
    v.push_back(Tokenizer::fromJson("../shared/data/tokenizers/gemma3"));
    v.push_back(Tokenizer::fromGguf("../shared/data/tokenizer-tests/llama-spm.gguf"));
    return v;
  }();
  return all;
}

}  // namespace

// Loading the vocabularies takes seconds; do it before the per-input clock starts.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  ++data, --size;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (mode % 4 == 3) {
    try {
      const gizml::llm::GgufFile file(std::vector<uint8_t>(data, data + size), "fuzz");
      gizml::llm::loadGgufTokenizer(file);
    } catch (const gizml::Error&) {
    }
    return 0;
  }
  const Tokenizer& t = tokenizers()[mode % 3];
  if (mode & 4) {
    // Ids from the bytes, mostly in range.
    std::vector<gizml::llm::TokenId> ids(size / 4);
    if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * 4);
    const auto n = static_cast<gizml::llm::TokenId>(t.vocabSize());
    for (auto& id : ids) {
      if (mode & 8) id = static_cast<gizml::llm::TokenId>(static_cast<uint32_t>(id) % static_cast<uint32_t>(n));
    }
    try {
      const std::string decoded = t.decode(ids, mode & 16);
      if (gizml::llm::unicode::toValidUtf8(decoded) != decoded) __builtin_trap();
      gizml::llm::StreamDecoder stream(t, mode & 16);
      std::string joined;
      for (auto id : ids) joined += stream.push(id);
      joined += stream.flush();
      if (joined != decoded) __builtin_trap();
    } catch (const gizml::Error&) {
    }
    return 0;
  }
  const auto ids = t.encode(text, mode & 8);
  // Every id must be in range, so decoding what encode gives never throws.
  t.decode(ids);
  return 0;
}
