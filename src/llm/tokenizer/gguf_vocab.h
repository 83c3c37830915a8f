#pragma once
// The tokenizer.ggml.* fields of a GGUF file, read by a small bounds-checked parser of the header
// and metadata only (to be replaced by the full GGUF reader when it lands).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gizml::llm {

struct GgufVocab {
  std::string model;  // tokenizer.ggml.model: "llama" (SentencePiece), "gpt2" (byte-level BPE)
  std::string pre;    // tokenizer.ggml.pre: the pre-tokenizer of a byte-level BPE
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> tokenTypes;  // llama.cpp's: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  std::vector<std::string> merges;  // "left right"
  std::optional<int64_t> bos, eos;
  std::optional<bool> addBos, addEos, addSpacePrefix;
};

/// Reads path's tokenizer fields; throws gizml::Error on a malformed or truncated file.
GgufVocab readGgufVocab(const std::string& path);

/// The same from the bytes of a GGUF file (its header and metadata suffice).
GgufVocab parseGgufVocab(const uint8_t* data, size_t size, const std::string& name);

}  // namespace gizml::llm
