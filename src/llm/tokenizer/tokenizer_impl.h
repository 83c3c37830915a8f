#pragma once
// What a loaded tokenizer is made of; the loaders (load_json.cpp, load_gguf.cpp) fill it in and
// tokenizer.cpp runs it.
#include <gizml/tokenizer.h>

#include <mutex>
#include <string>
#include <vector>

#include "llm/tokenizer/added_tokens.h"
#include "llm/tokenizer/bpe.h"
#include "llm/tokenizer/pretokenize.h"
#include "llm/tokenizer/vocab.h"

namespace gizml::llm {

/// U+2581, SentencePiece's space.
inline constexpr std::string_view kSentencePieceSpace = "\xE2\x96\x81";

struct Tokenizer::Impl {
  enum class Model {
    byteLevelBpe,  // bytes spelled by GPT-2's table, split by a regex, merged by rank
    bpe,           // characters merged by rank, <0xNN> byte fallback (tokenizer.json)
    spm,           // llama.cpp's score-merging SentencePiece (GGUF "llama")
  };
  enum class Normalizer {
    none,
    nfc,
    spaceToMeta,        // ' ' -> U+2581
    prependSpaceToMeta  // U+2581 before the text, then ' ' -> U+2581 (Llama 2's tokenizer.json)
  };
  enum class LeadingSpace {
    keep,
    stripFirst,        // decode drops one leading space of the text (the prefix encode adds)
    stripAfterSpecial  // ... of the text at the start and after every added token (llama.cpp)
  };

  Model model = Model::byteLevelBpe;
  Normalizer normalizer = Normalizer::none;
  SplitPattern pattern = SplitPattern::qwen2;  // byte-level BPE only
  LeadingSpace leadingSpace = LeadingSpace::keep;
  bool ignoreMerges = false;  // a word that is itself a token is not merged (Llama 3)
  bool byteFallback = false;
  bool fuseUnk = false;
  bool spacePrefix = false;  // spm: a space before text at the start and after added tokens

  Vocab vocab;
  std::vector<bool> added;  // matched as added tokens (ends a SentencePiece run)
  MergeTable merges;
  std::vector<float> scores;  // spm
  int32_t byteIds[256];       // byte-level: the token of each byte; else <0xNN> (or -1)
  int32_t unk = -1;
  AddedTokenMatcher rawTokens, normalizedTokens;
  std::vector<int32_t> prefix, suffix;  // added around a sequence by encode(addSpecial)
  int32_t bos = -1, eos = -1;

  // Words already merged (key: the word's bytes). Shared by encode calls; a call that finds it
  // busy works without it.
  struct Cache {
    std::mutex mutex;
    StringIds index;  // word -> offset into ids; length in lengths
    std::vector<int32_t> ids;
    std::vector<uint32_t> lengths;
  };
  mutable Cache cache;

  void encodeText(std::string_view text, bool afterAdded, std::vector<int32_t>& out, Cache* cache) const;
  void encodeWord(std::string_view word, std::vector<int32_t>& out, Cache* cache) const;
  void wordSymbols(std::string_view word, std::vector<int32_t>& symbols) const;
  std::string normalize(std::string_view text) const;
  /// Appends the bytes id decodes to; atStart tracks where decode drops a leading space.
  void appendPiece(std::string& out, int32_t id, bool skipSpecial, bool& atStart) const;
  /// Checks the loaded tables for consistency before use.
  void finish();
};

}  // namespace gizml::llm
