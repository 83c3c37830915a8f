#pragma once
// The GGUF loader behind Tokenizer::fromGguf, open to files already read (the fuzz target opens
// bytes held in memory).
#include <memory>

#include "llm/formats/gguf.h"
#include "llm/tokenizer/tokenizer_impl.h"

namespace gizml::llm {

/// The tokenizer described by file's tokenizer.ggml.* metadata; throws gizml::Error when it is
/// missing, inconsistent or of an unsupported kind.
std::unique_ptr<Tokenizer::Impl> loadGgufTokenizer(const GgufFile& file);

}  // namespace gizml::llm
