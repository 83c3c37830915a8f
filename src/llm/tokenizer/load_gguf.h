#pragma once
// The GGUF loader behind Tokenizer::fromGguf, open to files already read (the fuzz target opens
// bytes held in memory).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "llm/formats/gguf.h"
#include "llm/tokenizer/tokenizer_impl.h"

namespace gizml::llm {

/// The tokenizer described by file's tokenizer.ggml.* metadata; throws gizml::Error when it is
/// missing, inconsistent or of an unsupported kind.
std::unique_ptr<Tokenizer::Impl> loadGgufTokenizer(const GgufFile& file);
/// The same from tokenizer_gguf.json, the metadata that convert exports from a GGUF source.
std::unique_ptr<Tokenizer::Impl> loadGgufJsonTokenizer(const nlohmann::json& doc, const std::string& path);

}  // namespace gizml::llm
