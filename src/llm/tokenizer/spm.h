#pragma once
// llama.cpp's SentencePiece tokenizer for GGUF vocabularies (tokenizer.ggml.model "llama"):
// merge the adjacent pair whose joined text is the token with the highest score (leftmost on
// ties), then fall back to <0xNN> byte tokens for characters the vocabulary lacks.
#include <cstdint>
#include <string_view>
#include <vector>

#include "llm/tokenizer/vocab.h"

namespace gizml::llm {

/// Appends the tokens of text (spaces already escaped to U+2581). byteIds[b] is the token of
/// byte b (or -1 to drop it).
void tokenizeSpm(const Vocab& vocab, const std::vector<float>& scores, const int32_t* byteIds,
                 std::string_view text, std::vector<int32_t>& out);

}  // namespace gizml::llm
