#pragma once
// Hand-written matchers for the split regexes of the byte-level BPE models we know; each gives
// exactly the pieces of the `tokenizers` Split(Regex, Isolated) pre-tokenizer.
#include <cstddef>
#include <string_view>
#include <vector>

namespace gizml::llm {

enum class SplitPattern {
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  qwen2,
  llama3,  // as qwen2 with \p{N}{1,3}
  qwen35,  // as qwen2 with [\p{L}\p{M}]+ for letters and [^\s\p{L}\p{M}\p{N}] for punctuation
  // SmolLM (llama.cpp's "smollm"): each \p{N} alone, then GPT-2's
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ between them
  smollm,
};

/// The pattern whose regex source this is, or false if we have no matcher for it.
bool splitPatternFromRegex(std::string_view regex, SplitPattern& pattern);

struct Piece {
  size_t begin, end;  // byte offsets into the text
};

/// Appends the pieces of text (which cover it entirely) to pieces.
void splitPieces(SplitPattern pattern, std::string_view text, std::vector<Piece>& pieces);

}  // namespace gizml::llm
